// Jarvis service worker: shows the server's Web Push notifications and opens the app on a click.
// The payload is JSON {title, body, url} (text is shown as the body).
self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { body: event.data ? event.data.text() : '' };
  }
  const title = data.title || 'Jarvis';
  event.waitUntil(self.registration.showNotification(title, {
    body: data.body || data.headline || '',
    tag: data.tag || (data.run_id ? `run-${data.run_id}` : undefined),
    data: { url: data.url || (data.run_id ? `/#/dashboard/runs/${data.run_id}` : '/#/inbox') },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  let url = new URL((event.notification.data && event.notification.data.url) || '/', self.location.origin);
  // Only the app itself is opened: a link to another origin keeps just its in-app route.
  if (url.origin !== self.location.origin) url = new URL(`/${url.hash}`, self.location.origin);
  event.waitUntil(self.clients.matchAll({ type: 'window' }).then((wins) => {
    for (const w of wins) if ('focus' in w) { w.navigate(url.href); return w.focus(); }
    return self.clients.openWindow(url.href);
  }));
});
