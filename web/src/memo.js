// memo(Component): render it again only when a prop changed (compared with ===). Preact's core has no
// memo (preact/compat does, with all of React's compatibility layer); a long thread needs one, so
// that typing in the composer or loading an earlier page does not re-render (and re-parse the
// markdown of) every message already shown.
import { Component, h } from 'preact';

/** Props equal key by key (===): the default test of `memo`. */
export function shallowEqual(a, b) {
  for (const k in b) if (b[k] !== a[k]) return false;
  for (const k in a) if (!(k in b)) return false;
  return true;
}

/** `Inner`, rendered again only when `same(previous props, next props)` is false (by default: when a
 * prop changed, compared with ===). */
export function memo(Inner, same = shallowEqual) {
  class Memo extends Component {
    shouldComponentUpdate(next) {
      return !same(this.props, next);
    }

    render(props) {
      return h(Inner, props);
    }
  }
  Memo.displayName = `memo(${Inner.displayName || Inner.name})`;
  return Memo;
}
