(el) => {
  const form = el instanceof HTMLFormElement ? el : (el.form || el.closest('form'));
  if (!form) return 'no_form';
  const submitter = (el !== form && el.form === form && (el.type === 'submit' || el.type === 'image'))
    ? el : null;
  let seen = null;
  const listen = (event) => { seen = event; };
  form.addEventListener('submit', listen);
  try { if (submitter) form.requestSubmit(submitter); else form.requestSubmit(); }
  finally { form.removeEventListener('submit', listen); }
  if (!seen) return 'invalid';
  return seen.defaultPrevented ? 'prevented' : 'submitted';
}
