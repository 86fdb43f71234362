() => document.body ? document.body.innerText : document.documentElement.innerText || ''
