"""Vouch's date and time formats (FORMAT_MODULE_PATH): one format, with its time zone, on every
page. Django 5 always localizes, so the locale's formats win over settings.DATETIME_FORMAT; this
package is where they are set."""
