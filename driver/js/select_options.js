(el, wanted) => {
  if (!(el instanceof HTMLSelectElement)) return {error: 'not_select'};
  const options = Array.from(el.options);
  const missing = wanted.filter((w) => !options.some((o) => o.value === w || o.label === w || o.text === w));
  return {missing, multiple: el.multiple};
}
