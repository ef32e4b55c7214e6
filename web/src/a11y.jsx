// The skip link: the first stop of the keyboard on every signed-in page, to the page's main content
// (the <main id="main-content"> on show: the chat's only while it is visible, since it stays mounted).
// The app routes by hash (#/...), so the link moves focus itself rather than following its href.

export function SkipLink() {
  const skip = (e) => {
    e.preventDefault();
    const main = document.getElementById('main-content');
    if (!main) return;
    main.tabIndex = -1;
    main.focus();
  };
  return <a class="skip-link" href="#main-content" onClick={skip}>Skip to main content</a>;
}
