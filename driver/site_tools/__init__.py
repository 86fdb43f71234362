"""WebMCP site tools: ``navigator.modelContext`` in every document, the tools pages declare, and the
continuation tokens that carry one call of a tool across documents and frames (issue 16)."""

from driver.site_tools.runtime import BINDING, SiteToolHooks, SiteTools

__all__ = ["BINDING", "SiteToolHooks", "SiteTools"]
