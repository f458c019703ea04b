"""Many instance files into one results CSV, locally or on Dask (``run``), with the CSV
and schedule files it writes and resumes from (``files``)."""
