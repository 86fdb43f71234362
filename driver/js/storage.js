([area, op, key, value]) => {
  let store;
  try { store = area === 'session' ? window.sessionStorage : window.localStorage; }
  catch (e) { return {error: 'unavailable'}; }
  if (!store) return {error: 'unavailable'};
  try {
    if (op === 'get') {
      if (key !== null) return {value: store.getItem(key)};
      const items = {};
      for (let i = 0; i < store.length; i++) { const k = store.key(i); items[k] = store.getItem(k); }
      return {items};
    }
    if (op === 'set') { store.setItem(key, value); return {set: key}; }
    if (op === 'remove') { const existed = store.getItem(key) !== null; store.removeItem(key);
                           return {removed: key, existed}; }
    const n = store.length; store.clear(); return {cleared: n};
  } catch (e) { return {error: e && e.name === 'QuotaExceededError' ? 'quota' : 'failed'}; }
}
