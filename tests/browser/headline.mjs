// What misses cost, as a person reads it: the overview's and a machine's headline figures equal
// /api/v1/headline's; machines without the hook are named, not shown at 0%; the history page's
// hit rate counts the hook's lookups only; its kernel filter is one line high.
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node headline.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

const pct = r => (r === null ? '–' : `${(r * 100).toFixed(1)}%`);

async function figures(page) {
  return page.$$eval('#headline tr[data-window]', rows => rows.map(r => ({
    window: r.dataset.window,
    rate: r.querySelector('.hl-rate').innerText.trim(),
    hits: Number(r.querySelector('.hl-hits').innerText),
    misses: Number(r.querySelector('.hl-misses').innerText),
  })));
}

async function compare(page, api, what) {
  const shown = await figures(page);
  check(shown.map(r => r.window).join() === 'day,week,all', `${what}: a row per window`);
  for (const r of shown) {
    const w = api[r.window];
    check(r.rate === pct(w.hit_rate) && r.hits === w.hits && r.misses === w.misses,
      `${what} ${r.window}: page ${r.rate} ${r.hits}/${r.misses} = API ${pct(w.hit_rate)} ${w.hits}/${w.misses}`);
  }
}

await run('headline', async page => {
  await page.goto(`${base}/`);
  const api = await (await page.request.get(`${base}/api/v1/headline`)).json();
  await compare(page, api, 'overview');
  check(api.all.hits > 0 && api.all.hit_rate > 0, `the demo's hook machine has hits (${api.all.hits})`);
  const without = await page.locator('#hl-without-hook a').allInnerTexts();
  const apiWithout = api.machines.filter(m => !m.hook).map(m => m.name);
  check(JSON.stringify(without) === JSON.stringify(apiWithout) && without.length > 0,
    `machines without the hook named: ${without.join(', ')}`);
  const hooked = await page.$$eval('#hl-machines tr[data-machine]', rs => rs.map(r => r.dataset.machine));
  check(JSON.stringify(hooked) === JSON.stringify(api.machines.filter(m => m.hook).map(m => m.name)),
    `machines with the hook listed: ${hooked.join(', ')}`);
  check((await page.locator('#hl-caption').innerText()).includes('Triton cache lookups the hook saw'), 'the caption says what is counted');
  check((await page.locator('#hl-artifacts').innerText()).includes('static CUDA launcher'), 'Inductor/vLLM machines get the warm-start note');
  check(await page.locator('#hl-trend rect').count() === 2 * api.trend.length, `a trend bar pair per day (${api.trend.length})`);
  await page.locator('#headline').screenshot({ path: `${shots}/headline-overview.png` });

  const m = api.machines.find(m => m.hook).name;
  await page.goto(`${base}/machines/${encodeURIComponent(m)}`);
  const one = await (await page.request.get(`${base}/api/v1/headline?machine=${encodeURIComponent(m)}`)).json();
  await compare(page, one, `machine ${m}`);
  await page.screenshot({ path: `${shots}/headline-machine.png`, fullPage: true });

  const off = apiWithout[0];
  await page.goto(`${base}/machines/${encodeURIComponent(off)}`);
  check(await page.locator('#hl-no-hook').count() === 1 && await page.locator('#headline .hl-rate').count() === 0,
    `${off}: no hit rate, the hook's absence said`);

  // /history over every machine: the same hit rate as the headline's all-time one
  await page.goto(`${base}/history?bucket=day`);
  check((await page.locator('#total-hit-rate').innerText()) === pct(api.all.hit_rate),
    `history's fleet hit rate ${await page.locator('#total-hit-rate').innerText()} = the hook's ${pct(api.all.hit_rate)}`);
  const box = await page.locator('input[name=kernel]').boundingBox();
  check(box.height < 48 && box.width <= 300, `the kernel filter is one line (${box.width}×${box.height})`);
  await page.screenshot({ path: `${shots}/history.png`, fullPage: false });
});
