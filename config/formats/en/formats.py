"""Formats for `en` (and `en-us`, the LANGUAGE_CODE): ISO-like dates and times with the time zone
(`2026-12-01 06:30:00 UTC`), so a reader never guesses the zone or the day/month order. What is
not set here (input formats, separators) falls back to Django's own `en` module."""

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
TIME_FORMAT = "H:i:s T"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
