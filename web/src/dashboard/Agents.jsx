// Agent configuration per owner: the supervisor's and the workers' model (picked from the models the
// deployment can reach, or typed: a compatible server's own ids are allowed), temperature, max tokens,
// instructions addendum and allowed tools with what each does (null resets a field to its default).
import { useState } from 'preact/hooks';
import { get, put } from '../api.js';
import { when } from '../format.js';
import { ErrorLine, attempt, useLoad } from './common.jsx';

const price = (m) => (m.usd_per_million_in == null ? 'price unknown'
  : `$${m.usd_per_million_in} in / $${m.usd_per_million_out} out per million tokens`);
const firstSentence = (text) => (text.match(/^.*?[.!?](?=\s+[A-Z`(]|$)/s) || [text])[0].trim();

function AgentForm({ entry, models, onSaved }) {
  const [draft, setDraft] = useState({
    model: entry.model ?? '', temperature: entry.temperature ?? '', max_tokens: entry.max_tokens ?? '',
    instructions: entry.instructions ?? '', allowed_tools: entry.allowed_tools ?? entry.available_tools ?? [],
  });
  const [error, setError] = useState('');
  const [saved, setSaved] = useState('');
  const name = entry.agent;
  const set = (k) => (e) => setDraft({ ...draft, [k]: e.currentTarget.value });
  const toggleTool = (tool) => setDraft({ ...draft, allowed_tools: draft.allowed_tools.includes(tool)
    ? draft.allowed_tools.filter((t) => t !== tool) : [...draft.allowed_tools, tool] });
  const send = async (body) => {
    const r = await attempt(setError, () => put(`/api/jarvis/agents/${name}`, body));
    if (r) { setSaved(`Saved ${when(r.updated_at) || ''}`); onSaved(r); }
  };
  const save = (e) => {
    e.preventDefault();
    send({
      model: draft.model.trim() || null,
      temperature: draft.temperature === '' ? null : Number(draft.temperature),
      max_tokens: draft.max_tokens === '' ? null : Number(draft.max_tokens),
      instructions: draft.instructions.trim() || null,
      allowed_tools: draft.allowed_tools,
    });
  };
  const reset = () => send({ model: null, temperature: null, max_tokens: null, instructions: null, allowed_tools: null });
  const d = entry.defaults || {};
  return (
    <form class="stack agent" onSubmit={save} aria-label={`${name} configuration`}>
      <h3>{name === 'supervisor' ? 'Supervisor' : 'Worker'}</h3>
      <ErrorLine error={error} />
      <label>Model <input list={`models-${name}`} autocomplete="off" spellcheck={false} value={draft.model} onInput={set('model')} placeholder={d.model || ''}
        aria-describedby={`models-${name}-hint`} /></label>
      <datalist id={`models-${name}`} data-models>{models.map((m) => <option key={m.id} value={m.id} label={`${m.source === 'price table' ? '' : `${m.source} · `}${price(m)}`} />)}</datalist>
      <p id={`models-${name}-hint`} class="muted small">Pick one of the {models.length} models this deployment can reach, or type another id its providers serve.</p>
      <label>Temperature <input type="number" min={0} max={2} step={0.1} value={draft.temperature} onInput={set('temperature')} placeholder={d.temperature ?? ''} /></label>
      <label>Max tokens <input type="number" min={1} step={1} value={draft.max_tokens} onInput={set('max_tokens')} placeholder={d.max_tokens ?? ''} /></label>
      <label>Instructions <textarea rows={4} value={draft.instructions} onInput={set('instructions')} placeholder="Added to the agent's instructions" /></label>
      <fieldset>
        <legend>Allowed tools</legend>
        {(entry.available_tools || []).map((tool) => {
          const about = (entry.tool_descriptions || {})[tool] || '';
          return (
            <label key={tool} class="check tool" data-tool={tool} title={about || undefined}>
              <input type="checkbox" checked={draft.allowed_tools.includes(tool)} onChange={() => toggleTool(tool)} aria-describedby={`${name}-tool-${tool}`} />
              {' '}<code>{tool}</code> <span id={`${name}-tool-${tool}`} class="muted small tool-about">{firstSentence(about)}</span>
            </label>
          );
        })}
      </fieldset>
      <p><button type="submit">Save {name}</button>{' '}
        <button type="button" class="secondary" onClick={reset}>Reset {name} to defaults</button>{' '}
        <span role="status" class="muted">{saved}</span></p>
    </form>
  );
}

export function Agents() {
  const list = useLoad(() => get('/api/jarvis/agents'));
  const models = useLoad(() => get('/api/jarvis/models'));
  const [version, setVersion] = useState(0);
  return (
    <>
      <h2>Agents</h2>
      <ErrorLine error={list.error} />
      {list.data && list.data.agents.map((a) => (
        <AgentForm key={`${a.agent}-${version}-${a.updated_at}`} entry={a} models={models.data ? models.data.models : []}
          onSaved={(r) => { list.setData({ agents: list.data.agents.map((x) => (x.agent === r.agent ? r : x)) }); setVersion((v) => v + 1); }} />
      ))}
    </>
  );
}
