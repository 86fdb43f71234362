() => Array.from(document.querySelectorAll("h1, h2, h3"), (h) => (h.innerText || "").trim()).filter(Boolean).slice(0, 10)
