"""A sweep's files -> Results: each record file read and checked (record_file.py), the rank
records read by two processes (ahead.py), a sweep's archive read as a folder and written
(archive.py), the frames (results.py), the one reader of a sweep (load.py), the image each
point ran in (images.py)."""
