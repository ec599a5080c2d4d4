// Headless Chromium walk through the dashboard, as a person would use it:
// overview → kernel search (htmx narrows the list as you type) → a kernel → one of its entries
// → another IR tab. Fails on any console error, page error or failed request; saves screenshots.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node dashboard.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

await run('dashboard', async (page, state) => {
  // 1. overview
  await page.goto(`${base}/`);
  check(await page.locator('h1').innerText() === 'Overview', 'overview renders');
  check(await page.locator('a[href="/machines/a100-1"]').count() > 0, 'overview lists machine a100-1');
  check(await page.evaluate(() => typeof window.htmx === 'object'), 'vendored htmx loaded');
  await page.screenshot({ path: `${shots}/1-overview.png`, fullPage: true });

  // 2. machine page
  await page.click('a[href="/machines/a100-1"] >> nth=0');
  await page.waitForURL('**/machines/a100-1');
  check(await page.locator('svg.chart').count() >= 2, 'machine page draws SVG charts');
  await page.screenshot({ path: `${shots}/2-machine-a100-1.png`, fullPage: true });

  // 3. kernel search as you type
  await page.click('header nav a[href="/kernels"]');
  await page.waitForURL('**/kernels');
  const before = await page.locator('#kernel-list a.kernel-link').count();
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.locator('input[name=q]').pressSequentially('softm', { delay: 60 });
  await page.waitForURL(/q=softm/);
  await page.waitForFunction(() => [...document.querySelectorAll('#kernel-list a.kernel-link')]
    .every(a => a.textContent.includes('softm')));
  const names = await page.locator('#kernel-list a.kernel-link').allInnerTexts();
  check(names.length > 0 && names.length < before, `search narrows ${before} kernels to ${names.length}: ${names.join(', ')}`);
  check(await page.evaluate(() => window.__sameDocument === true), 'the list was swapped by htmx, not a page load');
  await page.screenshot({ path: `${shots}/3-kernels-search.png`, fullPage: true });
  await page.selectOption('select[name=backend]', 'hip');
  await page.waitForURL(/backend=hip/);
  await page.waitForLoadState('networkidle');
  await page.screenshot({ path: `${shots}/3b-kernels-hip.png`, fullPage: true });
  // a reload of the pushed URL renders the same list
  const swapped = await page.locator('#kernel-list a.kernel-link').allInnerTexts();
  await page.reload();
  check(JSON.stringify(await page.locator('#kernel-list a.kernel-link').allInnerTexts()) === JSON.stringify(swapped), 'a full load of the pushed URL shows the same list');

  // 4. a kernel: the variants grid with the autotune winner
  await page.goto(`${base}/kernels?q=matmul`);
  await page.click('a.kernel-link:text-is("matmul_kernel")');
  await page.waitForURL('**/kernels/matmul_kernel');
  check(await page.locator('table.variants').count() > 0, 'variants grid');
  check(await page.locator('table.variants .badge.win').count() > 0, 'autotune winner marked');
  await page.screenshot({ path: `${shots}/4-kernel-matmul.png`, fullPage: true });
  // autotune timings sit in the grid they were measured in: the H100's, not the A100's
  const sm80 = page.locator('section.variant-group', { has: page.locator('h2', { hasText: 'sm_80' }) });
  check(await sm80.count() > 0 && await sm80.locator('.badge.win, .kwargs').count() === 0, 'no autotune timings in the sm_80 grids');
  const winnerGrid = page.locator('section.variant-group', { has: page.locator('.badge.win') }).first();
  check((await winnerGrid.locator('h2').innerText()).includes('sm_90'), 'the winner is in an sm_90 grid');
  await winnerGrid.screenshot({ path: `${shots}/4b-kernel-winner-grid.png` });

  // 5. an entry, then another IR tab through htmx
  await page.locator('table.variants td a.mono').first().click();
  await page.waitForURL('**/entries/**');
  check(await page.locator('.ir pre.code').count() === 1, 'IR viewer shows');
  await page.screenshot({ path: `${shots}/5-entry.png`, fullPage: false });
  await page.click('a.ir-tab:text-is("ttir")');
  await page.waitForURL(/ir=ttir/);
  await page.waitForSelector('a.ir-tab.active:text-is("ttir")');
  check((await page.locator('.ir pre.code').innerText()).includes('tt.func'), 'the ttir tab shows TTIR');
  await page.screenshot({ path: `${shots}/6-entry-ttir.png`, fullPage: false });

  // 5b. max-autotune decisions: machine page → decision list → one decision → the winner's entry
  await page.goto(`${base}/machines/h100-autotune`);
  await page.click('#autotune-link');
  await page.waitForURL(/autotune\?machine=h100-autotune/);
  check(await page.locator('#decision-list tr.decision').count() === 4, 'four Inductor decisions listed');
  await page.locator('#decision-list tr.decision a').first().click();
  await page.waitForURL(/\/autotune\/\d+$/);
  check(await page.locator('#choices tr.winner-row a.entry-link').count() === 1, 'the winner links to its entry');
  await page.screenshot({ path: `${shots}/5b-autotune-decision.png`, fullPage: true });
  await page.locator('#choices tr.winner-row a.entry-link').click();
  await page.waitForURL('**/entries/h100-autotune/**');
  check((await page.locator('.entry-autotune').innerText()).includes(': won'), 'the entry says it won');

  // 6. an AMD entry and the 404 page (expected 404 not counted as a problem)
  await page.goto(`${base}/kernels?backend=hip&q=softmax`);
  await page.click('a.kernel-link:text-is("softmax_kernel")');
  await page.locator('table.variants td a.mono', { hasText: 'mi300-1:' }).first().click();
  await page.waitForURL('**/entries/mi300-1/**');
  check((await page.locator('#resources').innerText()).includes('VGPRs'), 'AMD entry shows VGPRs');
  await page.screenshot({ path: `${shots}/7-entry-mi300.png`, fullPage: true });
  state.expect404 = true;
  await page.goto(`${base}/machines/no-such-machine`);
  check((await page.locator('h1').innerText()).startsWith('404'), '404 page for an unknown machine');
  await page.screenshot({ path: `${shots}/8-not-found.png` });

});
