if (navigator.serviceWorker) {
  const refuse = () => Promise.reject(new DOMException('Service workers are blocked', 'SecurityError'));
  Object.defineProperty(navigator.serviceWorker, 'register', {value: refuse});
}
