"""The report: its sections in order and the terminal's text (contents.py), report.html from
its template (page.py, templates/report.html.j2)."""
