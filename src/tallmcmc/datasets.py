"""Small data sets shipped with the package.

References
----------
.. [1] A. Canty and B. D. Ripley. boot: Bootstrap R (S-Plus) Functions.
   R package, dataset ``nodal``.
.. [2] B. W. Brown (1980). Prediction analysis for binary data. In
   *Biostatistics Casebook*, eds R. G. Miller, B. Efron, B. W. Brown and
   L. E. Moses, 3-18. Wiley.
.. [3] J. Gorham and L. Mackey (2015). Measuring sample quality with Stein's
   method. *Advances in Neural Information Processing Systems 28*, Section 5.4.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["NODAL_COLUMNS", "load_nodal"]

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
