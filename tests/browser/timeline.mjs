// The overview's fleet timeline as a person reads it: the same events as /api/v1/timeline, in the
// same order, with an upgrade in it (the demo's a100 and mi300 in-place upgrades); the upgrade's
// link opens the invalidation report of that scan, which tells the same version change; nothing
// overflows the viewport.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node timeline.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

await run('timeline', async page => {
  await page.goto(`${base}/`);
  const api = await (await page.request.get(`${base}/api/v1/timeline`)).json();
  const shown = await page.$$eval('#timeline tr[data-kind]', rows => rows.map(r => ({
    kind: r.dataset.kind,
    machine: r.children[1].innerText.trim(),
    text: r.querySelector('.tl-text').innerText.trim(),
    href: r.querySelector('.tl-text a').getAttribute('href'),
  })));
  check(shown.length > 0 && shown.length === Math.min(api.length, 50), `${shown.length} events shown of the API's ${api.length}`);
  shown.forEach((s, i) => {
    const a = api[i];
    check(s.kind === a.kind && s.machine === a.machine && s.text === a.text && s.href === a.href,
      `event ${i}: ${s.machine} "${s.text}" = the API's ${a.machine} "${a.text}"`);
  });
  const up = shown.find(s => s.kind === 'triton' && s.machine === 'a100-1');
  check(up && up.text === 'Triton 3.4.0 → 3.5.1', `the a100 upgrade is on the timeline: ${up?.text}`);
  check(shown.some(s => s.kind === 'invalidation' && s.machine === 'a100-1' && s.text.startsWith('45 of 45 entries invalidated')),
    'and its mass invalidation');
  check(shown.filter(s => s.kind === 'new_machine').length === new Set(api.map(a => a.machine)).size, 'a new-machine event per machine');
  check(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth),
    'the overview does not overflow the viewport');
  const box = await page.locator('#timeline').boundingBox();
  check(box.x >= 0 && box.x + box.width <= 1360, `the timeline fits the viewport (${box.x}+${box.width})`);
  await page.locator('#timeline').screenshot({ path: `${shots}/timeline.png` });

  // The upgrade's link: the report of that scan, which names the same versions.
  await page.locator('#timeline tr[data-kind=triton]', { hasText: 'a100-1' }).locator('a').click();
  await page.waitForSelector('#summary', { timeout: 60000 });
  const summary = await page.locator('#summary').innerText();
  check(summary.includes('Triton 3.4.0 → 3.5.1'), `the report says it: ${summary}`);
  check(new URL(page.url()).search === new URL(up.href, base).search, `at ${page.url()}`);
});
