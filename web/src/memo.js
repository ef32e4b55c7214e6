// memo(Component): render it again only when a prop changed (compared with ===). Preact's core has no
// memo (preact/compat does, with all of React's compatibility layer); a long thread needs one, so
// that typing in the composer or loading an earlier page does not re-render (and re-parse the
// markdown of) every message already shown.
import { Component, h } from 'preact';

export function memo(Inner) {
  class Memo extends Component {
    shouldComponentUpdate(next) {
      for (const k in next) if (next[k] !== this.props[k]) return true;
      for (const k in this.props) if (!(k in next)) return true;
      return false;
    }

    render(props) {
      return h(Inner, props);
    }
  }
  Memo.displayName = `memo(${Inner.displayName || Inner.name})`;
  return Memo;
}
