async () => {
  if (!navigator.clipboard || !window.isSecureContext) return {fallback: true};
  try { return {text: await navigator.clipboard.readText()}; } catch (e) { return {fallback: true}; }
}
