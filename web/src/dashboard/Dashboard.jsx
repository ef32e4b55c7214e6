// The power-user view: one panel at a time under #/dashboard/<panel>.
import { Agents } from './Agents.jsx';
import { Approvals } from './Approvals.jsx';
import { Contacts } from './Contacts.jsx';
import { Hosts } from './Hosts.jsx';
import { Mcp } from './Mcp.jsx';
import { Memory } from './Memory.jsx';
import { Runs } from './Runs.jsx';
import { Schedules } from './Schedules.jsx';
import { ThreadInspector } from './Thread.jsx';
import { Usage } from './Usage.jsx';
import { Workers } from './Workers.jsx';

const PANELS = [
  ['workers', 'Workers', Workers], ['thread', 'Thread', ThreadInspector], ['runs', 'Runs', Runs],
  ['usage', 'Usage', Usage], ['schedules', 'Schedules', Schedules], ['memory', 'Memory', Memory],
  ['contacts', 'Contacts', Contacts], ['hosts', 'Hosts', Hosts], ['agents', 'Agents', Agents],
  ['approvals', 'Approvals', Approvals],
  ['mcp', 'MCP servers', Mcp],
];

export function Dashboard({ panel, args }) {
  const found = PANELS.find(([slug]) => slug === panel);
  const Panel = found ? found[2] : null;
  return (
    <div class="dashboard">
      <nav aria-label="Dashboard" class="side">
        <h1>Dashboard</h1>
        {PANELS.map(([slug, name]) => (
          <a key={slug} href={`#/dashboard/${slug}`} aria-current={slug === panel ? 'page' : undefined}>{name}</a>
        ))}
      </nav>
      <main class="panel" id="main-content">
        {Panel ? <Panel args={args} /> : <><h2>Not found</h2><p>There is no panel “{panel}”.</p></>}
      </main>
    </div>
  );
}
