"""The test web site used by integration tests: `with TestSite() as site: page.goto(site.url("/form"))`."""

from tests.site.pages import HIDDEN_TEXT, REPORT_CONTENT, REPORT_NAME, TEXT_HEADING, TEXT_ITEMS, TEXT_PARAGRAPHS, TITLES
from tests.site.server import TestSite

__all__ = ["HIDDEN_TEXT", "REPORT_CONTENT", "REPORT_NAME", "TEXT_HEADING", "TEXT_ITEMS", "TEXT_PARAGRAPHS", "TITLES",
           "TestSite"]
