// Headless Chromium: the "What can go" section as a person sees it. On a machine page its rows
// say per class what /api/v1/machines/{name}/advice says, with the prune command to run there; on
// the overview the fleet's rows are the sums of the machines' and each machine links to its page.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node whatcango.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

const rows = (page) => page.locator('#what-can-go tr[data-bytes]').evaluateAll(trs => trs.map(tr => ({
  class: tr.dataset.class, items: +tr.dataset.items, bytes: +tr.dataset.bytes, inodes: +tr.dataset.inodes,
})));

await run('whatcango', async (page) => {
  await page.goto(`${base}/machines/a100-1`);
  const section = page.locator('#what-can-go');
  check(await section.isVisible(), 'machine page shows What can go');
  const api = await (await page.request.get(`${base}/api/v1/machines/a100-1/advice`)).json();
  const shown = await rows(page);
  const want = api.classes.map(t => ({ class: t.class, items: t.items, bytes: t.bytes, inodes: t.inodes }));
  check(shown.length > 0 && JSON.stringify(shown) === JSON.stringify(want),
    `machine rows are the API's: ${JSON.stringify(shown)} vs ${JSON.stringify(want)}`);
  check((await page.locator('#prune-command').innerText()) === api.command, `the command shown: ${api.command}`);
  check(await page.locator('#prune-command').isVisible(), 'the command is visible');
  await section.screenshot({ path: `${shots}/whatcango-machine.png` });

  await page.goto(`${base}/`);
  check(await page.locator('#what-can-go').isVisible(), 'overview shows What can go');
  const fleet = await rows(page);
  const machines = await page.locator('#what-can-go-machines a').evaluateAll(as => as.map(a => a.getAttribute('href')));
  check(machines.includes('/machines/a100-1'), `overview lists a100-1 among ${machines}`);
  const sums = {};
  for (const href of machines) {
    const a = await (await page.request.get(`${base}/api/v1${href}/advice`)).json();
    for (const t of a.classes) {
      const s = sums[t.class] ??= { items: 0, bytes: 0, inodes: 0 };
      s.items += t.items; s.bytes += t.bytes; s.inodes += t.inodes;
    }
  }
  for (const r of fleet) {
    const s = sums[r.class];
    check(s && s.items === r.items && s.bytes === r.bytes && s.inodes === r.inodes,
      `fleet ${r.class} is the machines' sum: ${JSON.stringify(r)} vs ${JSON.stringify(s)}`);
  }
  await page.locator('#what-can-go').screenshot({ path: `${shots}/whatcango-overview.png` });
});
