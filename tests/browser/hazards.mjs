// Headless Chromium: the machine page's "Hazards" section as a person sees it. Each cache dir's
// row names its file system and its cache inodes, which are the figures /metrics gives for that
// machine and root.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node hazards.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

await run('hazards', async (page) => {
  await page.goto(`${base}/machines/a100-1`);
  const section = page.locator('#hazards');
  check(await section.isVisible(), 'machine page shows Hazards');
  const rows = await page.locator('#hazards tr.hazard').evaluateAll(trs => trs.map(tr => ({
    root: tr.querySelector('td.path').firstChild.textContent.trim(),
    fs: tr.querySelector('td.fs').innerText,
    inodes: +tr.querySelectorAll('td.n')[0].innerText,
  })));
  check(rows.length > 0, `a row per cache dir: ${JSON.stringify(rows)}`);
  const metrics = await (await page.request.get(`${base}/metrics`)).text();
  for (const r of rows) {
    check(r.fs.length > 0, `file system named: ${JSON.stringify(r)}`);
    const line = metrics.split('\n').find(l => l.startsWith('cachelens_cache_inodes{')
      && l.includes('machine="a100-1"') && l.includes(`root="${r.root}"`));
    check(line && +line.split(' ').pop() === r.inodes, `cache inodes shown are /metrics's: ${line} vs ${r.inodes}`);
    check(r.inodes > 0, `the cache uses inodes: ${r.inodes}`);
  }
  await section.screenshot({ path: `${shots}/hazards-machine.png` });
});
