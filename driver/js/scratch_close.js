() => {
  const area = document.getElementById('__kitsune_clipboard');
  const text = area ? area.value : null;
  if (area) area.remove();
  const back = window.__kitsuneFocus;
  delete window.__kitsuneFocus;
  if (back && typeof back.focus === 'function') back.focus();
  return text;
}
