// Jarvis service worker: shows the server's Web Push notifications and opens the app on a click.
// The payload is JSON {title, body, url} (text is shown as the body). A pending approval's push
// also carries {approval_id, actions}: its Approve / Deny buttons answer it through the API with the
// browser's session cookie (the same answer as the web client, SMS, email and the CLI), and a second
// notification says what the answer did (a late answer says it was answered already or expired).
const ACTIONS = new Set(['approve', 'deny']);

self.addEventListener('push', (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { body: event.data ? event.data.text() : '' };
  }
  const title = data.title || 'Jarvis';
  const approvalId = Number.isInteger(data.approval_id) ? data.approval_id : null;
  const options = {
    body: data.body || data.headline || '',
    tag: data.tag || (data.run_id ? `run-${data.run_id}` : undefined),
    data: { url: data.url || (data.run_id ? `/#/dashboard/runs/${data.run_id}` : '/#/inbox'), approval_id: approvalId },
  };
  if (approvalId !== null) {
    options.actions = (Array.isArray(data.actions) ? data.actions : [])
      .filter((a) => a && ACTIONS.has(a.action)).map((a) => ({ action: a.action, title: String(a.title || a.action) }));
    options.requireInteraction = true; // an approval waits for the owner: it stays until answered or dismissed
  }
  event.waitUntil(self.registration.showNotification(title, options));
});

/** Answer approval `id` with `action` ("approve" | "deny") as the signed-in browser; what it did, in words. */
async function answerApproval(id, action) {
  let resp;
  try {
    // Same origin with the session cookie: the server's CSRF check sees Sec-Fetch-Site same-origin and
    // the X-Zerg-Client header the web app sends with every request.
    resp = await fetch(`/api/jarvis/approvals/${id}/${action}`, {
      method: 'POST', credentials: 'same-origin', headers: { 'X-Zerg-Client': 'web', 'content-type': 'application/json' },
      body: '{}',
    });
  } catch {
    return { ok: false, signedOut: false, message: `Approval ${id}: the server cannot be reached; open Jarvis to answer.` };
  }
  let body = {};
  try { body = await resp.json(); } catch { body = {}; }
  if (resp.status === 401) return { ok: false, signedOut: true, message: `Approval ${id}: sign in to Jarvis to answer.` };
  return { ok: resp.ok, signedOut: false, message: body.message || `Approval ${id}: the server answered ${resp.status}.` };
}

function openApp(rawUrl) {
  let url = new URL(rawUrl || '/', self.location.origin);
  // Only the app itself is opened: a link to another origin keeps just its in-app route.
  if (url.origin !== self.location.origin) url = new URL(`/${url.hash}`, self.location.origin);
  return self.clients.matchAll({ type: 'window' }).then((wins) => {
    for (const w of wins) if ('focus' in w) { w.navigate(url.href); return w.focus(); }
    return self.clients.openWindow(url.href);
  });
}

async function onClick(notification, action) {
  const data = notification.data || {};
  if (data.approval_id != null && ACTIONS.has(action)) {
    const said = await answerApproval(data.approval_id, action);
    if (said.signedOut) return openApp(data.url);
    return self.registration.showNotification(said.ok ? 'Jarvis: answered' : 'Jarvis: not answered', {
      body: said.message, tag: `zerg-approval-${data.approval_id}`, data: { url: data.url },
    });
  }
  return openApp(data.url);
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  event.waitUntil(onClick(event.notification, event.action));
});
