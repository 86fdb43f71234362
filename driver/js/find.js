(els, limit) => els.slice(0, limit).map((el) => {
  const text = (el.innerText !== undefined ? el.innerText : el.textContent) || '';
  const visible = typeof el.checkVisibility === 'function'
    ? el.checkVisibility({visibilityProperty: true, opacityProperty: false})
    : !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  return {tag: el.tagName.toLowerCase(), text: text.trim().replace(/\s+/g, ' ').slice(0, 200), visible};
})
