async (text) => {
  if (!navigator.clipboard || !window.isSecureContext) return 'fallback';
  try { await navigator.clipboard.writeText(text); return 'ok'; } catch (e) { return 'fallback'; }
}
