import { describe, expect, it } from 'vitest';
import { memo } from './memo.js';

describe('memo', () => {
  const Inner = ({ m }) => m.text;
  const Shown = memo(Inner);
  const shown = (props) => { const c = new Shown(props); c.props = props; return c; };

  it('skips a render when every prop is the same object', () => {
    const m = { text: 'a' };
    expect(shown({ m }).shouldComponentUpdate({ m })).toBe(false);
  });

  it('renders again when a prop changed, appeared or went', () => {
    const m = { text: 'a' };
    expect(shown({ m }).shouldComponentUpdate({ m: { ...m } })).toBe(true);
    expect(shown({ m }).shouldComponentUpdate({ m, extra: 1 })).toBe(true);
    expect(shown({ m, extra: 1 }).shouldComponentUpdate({ m })).toBe(true);
  });

  it('renders the wrapped component with the same props', () => {
    const m = { text: 'a' };
    const vnode = shown({ m }).render({ m });
    expect(vnode.type).toBe(Inner);
    expect(vnode.props.m).toBe(m);
    expect(Shown.displayName).toBe('memo(Inner)');
  });

  it('takes its own test of sameness', () => {
    const Same = memo(Inner, (a, b) => a.m.text === b.m.text);
    const c = new Same({ m: { text: 'a' } });
    c.props = { m: { text: 'a' } };
    expect(c.shouldComponentUpdate({ m: { text: 'a' } })).toBe(false);
    expect(c.shouldComponentUpdate({ m: { text: 'b' } })).toBe(true);
  });
});
