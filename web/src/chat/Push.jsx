// Web Push: the service worker, a subscription with the server's VAPID key, the server told.
import { useState } from 'preact/hooks';
import { describe, get, post } from '../api.js';

const supported = typeof window !== 'undefined' && 'PushManager' in window && 'serviceWorker' in navigator;

export function vapidKey(base64url) {
  const pad = '='.repeat((4 - (base64url.length % 4)) % 4);
  const raw = atob((base64url + pad).replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

export function Push() {
  const [state, setState] = useState('');
  if (!supported) {
    return <fieldset class="menu-group"><legend>Notifications</legend><span class="muted">Push notifications are not supported in this browser</span></fieldset>;
  }
  const enable = async () => {
    setState('Enabling…');
    try {
      const permission = await Notification.requestPermission();
      if (permission !== 'granted') { setState('Notifications are blocked for this site'); return; }
      const { public_key: key } = await get('/api/jarvis/push/key');
      const reg = await navigator.serviceWorker.register('/sw.js');
      await navigator.serviceWorker.ready;
      const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: vapidKey(key) });
      const { endpoint, keys } = sub.toJSON();
      await post('/api/jarvis/push/subscriptions', { endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } });
      setState('Push notifications are on');
    } catch (err) {
      setState(`Push notifications could not be enabled: ${describe(err)}`);
    }
  };
  return (
    <fieldset class="menu-group push"><legend>Notifications</legend>
      <button type="button" class="secondary" onClick={enable}>Enable push notifications</button>
      {state && <span class="muted" role="status">{state}</span>}
    </fieldset>
  );
}
