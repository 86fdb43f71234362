() => {
  const visible = (e) => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
  const marked = document.querySelector('[data-kitsune-needs-user]');
  if (marked && visible(marked)) return {reason: marked.getAttribute('data-kitsune-needs-user'), evidence: 'marker'};
  const check = document.querySelector('.g-recaptcha, .h-captcha, .cf-turnstile, iframe[src*="recaptcha"], '
    + 'iframe[src*="hcaptcha"], iframe[src*="challenges.cloudflare.com"]');
  if (check && visible(check)) return {reason: 'human_check', evidence: 'captcha'};
  const password = [...document.querySelectorAll('input[type=password]')].find(visible);
  if (password) return {reason: 'sign_in', evidence: 'password_field'};
  return null;
}
