// The kernel page's filter and "where compile time goes", the entry page's compile stages and the
// history page's latest misses, as a person uses them: picking a machine in the form narrows the
// grid to that machine's entries (the count equals /api/v1/entries'); the hooked demo machine's
// kernel shows its stage sums; a miss leads to the entry it compiled; nothing overflows.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node kernelpage.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

const fits = page => page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);
const api = async (page, path) => (await page.request.get(`${base}${path}`)).json();

await run('kernelpage', async page => {
  await page.goto(`${base}/kernels/add_kernel`);
  const total = Number(await page.locator('#kernel-count').innerText());
  const machines = await page.$$eval('#kernel-filter select[name=machine] option', os => os.map(o => o.value).filter(v => v));
  check(machines.includes('a100-1') && machines.includes('mi300-1'), `machines offered: ${machines.join(', ')}`);
  await page.selectOption('#kernel-filter select[name=machine]', 'a100-1');
  await Promise.all([page.waitForURL(/machine=a100-1/), page.click('#kernel-filter button[type=submit]')]);
  const n = Number(await page.locator('#kernel-count').innerText());
  const entries = (await api(page, '/api/v1/entries?machine=a100-1&kernel=add_kernel&limit=10000'));
  check(n === entries.length && n < total, `a100-1: ${n} entries shown = the API's ${entries.length} (of ${total})`);
  const titles = await page.$$eval('section.variant-group h2', hs => hs.map(h => h.innerText));
  check(titles.length > 0 && titles.every(t => t.startsWith('cuda / sm_80')), `grids: ${titles.join(' | ')}`);
  check(await fits(page), 'the filtered kernel page does not overflow');
  await page.screenshot({ path: `${shots}/kernel-filtered.png`, fullPage: false });

  // The hooked machine's kernel: where its compile time went, and one entry's compiles.
  await page.goto(`${base}/kernels/add_kernel?machine=h100-hook`);
  const stages = await page.$$eval('#stages tr[data-stage]', rs => rs.map(r => r.dataset.stage));
  check(stages.includes('ttir') && stages.includes('cubin') && stages.indexOf('ttir') < stages.indexOf('cubin'),
    `stages in pipeline order: ${stages.join(', ')}`);
  check(await fits(page), 'the kernel page with stage sums does not overflow');
  await page.locator('#stages').screenshot({ path: `${shots}/kernel-stages.png` });

  // A miss on the history page leads to the entry it compiled, whose compile stages show.
  await page.goto(`${base}/history?machine=h100-hook&bucket=day`);
  const rows = await page.locator('#latest-misses tr.miss-row').count();
  check(rows === 10, `ten latest misses listed (${rows})`);
  check(await fits(page), 'the history page does not overflow');
  await page.locator('#latest-misses tr.miss-row').first().locator('.miss-key a').click();
  await page.waitForSelector('#compile-stages');
  const compiles = await page.locator('#compile-stages tr.compile-row').count();
  check(compiles >= 1, `the entry page lists its compile (${compiles})`);
  check(await fits(page), 'the entry page does not overflow');
  await page.locator('#compile-stages').screenshot({ path: `${shots}/entry-stages.png` });
});
