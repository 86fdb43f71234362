([text]) => {
  const area = document.createElement('textarea');
  area.id = '__kitsune_clipboard';
  area.setAttribute('aria-hidden', 'true');
  area.style.cssText = 'position:fixed;top:0;left:0;width:2px;height:2px;opacity:0;';
  window.__kitsuneFocus = document.activeElement;
  area.value = text === null ? '' : text;
  (document.body || document.documentElement).appendChild(area);
  area.focus();
  area.select();
  return true;
}
