// The chat's one settings menu (preferences, voice, read aloud, OpenAI voice, push): a popover that
// closes on Escape (focus back on its button) and on a click outside it.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';

export function Menu({ label = 'Settings', children }) {
  const [open, setOpen] = useState(false);
  const wrap = useRef(null);
  const button = useRef(null);
  // A layout effect: listening from the moment it opens (an effect would wait for the next paint, and an
  // Escape pressed before it would go to the chat's cancel instead).
  useLayoutEffect(() => {
    if (!open) return undefined;
    const onKey = (e) => {
      if (e.key !== 'Escape') return;
      e.preventDefault(); // taken: the chat's own Escape (cancel a run) leaves it alone
      e.stopPropagation();
      setOpen(false);
      button.current?.focus();
    };
    const onDown = (e) => { if (wrap.current && !wrap.current.contains(e.target)) setOpen(false); };
    document.addEventListener('keydown', onKey, true); // capture: before the chat's shortcuts
    document.addEventListener('pointerdown', onDown, true);
    return () => {
      document.removeEventListener('keydown', onKey, true);
      document.removeEventListener('pointerdown', onDown, true);
    };
  }, [open]);
  return (
    <div class="popover-wrap menu" ref={wrap}>
      <button type="button" class="secondary menu-button" ref={button} aria-expanded={open} aria-controls="chat-settings" onClick={() => setOpen(!open)}>{label}</button>
      {/* Kept mounted while closed: a voice session or a push subscription in progress goes on. */}
      <div id="chat-settings" class="popover" role="group" aria-label={label} hidden={!open}>{children}</div>
    </div>
  );
}
