"""The test web site used by integration tests: `with TestSite() as site: page.goto(site.url("/form"))`."""

from tests.site.pages import (
    HIDDEN_TEXT,
    NEEDS_USER_ATTRIBUTE,
    NEEDS_USER_TITLES,
    PIXEL_GIF,
    POLICY_TITLES,
    REPORT_CONTENT,
    REPORT_NAME,
    SERVICE_WORKER_JS,
    TARGET_TITLE,
    TEXT_HEADING,
    TEXT_ITEMS,
    TEXT_PARAGRAPHS,
    TITLES,
)
from tests.site.server import ANY, REDIRECT_STATUSES, TestSite

__all__ = ["ANY", "HIDDEN_TEXT", "NEEDS_USER_ATTRIBUTE", "NEEDS_USER_TITLES", "PIXEL_GIF", "POLICY_TITLES",
           "REDIRECT_STATUSES", "REPORT_CONTENT", "REPORT_NAME", "SERVICE_WORKER_JS", "TARGET_TITLE", "TEXT_HEADING",
           "TEXT_ITEMS", "TEXT_PARAGRAPHS", "TITLES", "TestSite"]
