// Back and forward over htmx-swapped views when htmx must ask the server for the page (its
// history cache empty: `historyCacheSize` 0, as after the cache dropped the entry). htmx then
// sends `HX-Request` *and* `HX-History-Restore-Request` and puts the answer in <body>: the
// answer must be the whole page (header, nav, form), not the bare fragment.
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node backforward.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

/// No history cache from here on: every back/forward is a restore from the server.
async function noHistoryCache(page) {
  await page.evaluate(() => {
    htmx.config.historyCacheSize = 0;
    sessionStorage.clear();
    localStorage.clear();
    window.__restores = [];
    document.addEventListener('htmx:historyRestore', e => window.__restores.push(e.detail.path));
  });
}

/// Goes back (or forward) and waits until htmx restored `urlPart` from the server.
async function travel(page, dir, urlPart) {
  const n = await page.evaluate(() => window.__restores.length);
  const restore = page.waitForRequest(r => r.url().includes(urlPart) && r.headers()['hx-history-restore-request'] === 'true');
  await (dir === 'back' ? page.goBack() : page.goForward());
  const req = await restore;
  check(req.headers()['hx-request'] === 'true', `${dir} to ${urlPart}: htmx asked with HX-Request and HX-History-Restore-Request`);
  await page.waitForFunction(n => window.__restores.length > n, n);
}

async function fullPage(page, what, main) {
  check(await page.locator('header.top nav a[href="/history"]').count() === 1, `${what}: the restored page has the nav`);
  check(await page.locator('body > main').count() === 1 && await page.locator('body > footer').count() === 1, `${what}: the restored page is whole (main, footer)`);
  check(await page.locator(main).count() === 1, `${what}: ${main} shows`);
}

await run('back/forward with htmx history restore', async (page) => {
  // compare: an invalidated entry's compare view, then another IR through htmx (pushes a URL).
  await page.goto(`${base}/invalidations?machine=a100-1&cause=compiler&page=1`);
  const href = await page.locator('a.compare').first().getAttribute('href');
  const compare = href.replaceAll('&amp;', '&');
  await page.goto(`${base}${compare}`);
  await noHistoryCache(page);
  await page.click("p.picker a:text-is('ttir')");
  await page.waitForURL(/ir=ttir/);
  await page.waitForFunction(() => document.querySelector('#ir')?.textContent.includes('.ttir'));
  await travel(page, 'back', compare.split('?')[1]);
  await page.waitForFunction(() => !location.search.includes('ir=ttir'));
  await fullPage(page, 'back to /compare', '#compare #headline');
  check(await page.locator('#compare').count() === 1 && await page.locator('#compare #compare').count() === 0, 'no page nested in the fragment');
  await page.screenshot({ path: `${shots}/backforward-compare-back.png`, fullPage: false });
  await travel(page, 'forward', 'ir=ttir');
  await fullPage(page, 'forward to /compare?…&ir=ttir', 'form.ids');
  check((await page.locator('#ir').textContent()).includes('.ttir'), 'forward shows the ttir diff');
  await page.screenshot({ path: `${shots}/backforward-compare-forward.png`, fullPage: false });

  // history: a filter change swaps the results (pushes a URL); back restores the unfiltered page.
  await page.goto(`${base}/history`);
  await noHistoryCache(page);
  await page.selectOption('select[name=machine]', 'a100-1');
  await page.waitForURL(/machine=a100-1/);
  await page.waitForSelector('section.history[data-machine="a100-1"]');
  await travel(page, 'back', '/history');
  await page.waitForFunction(() => !location.search.includes('machine=a100-1'));
  await fullPage(page, 'back to /history', 'form.filters');
  check(await page.locator('section.history[data-machine=""]').count() === 1, 'back shows all machines again');
  await page.screenshot({ path: `${shots}/backforward-history-back.png`, fullPage: false });
  await travel(page, 'forward', 'machine=a100-1');
  await fullPage(page, 'forward to /history?machine=a100-1', 'section.history[data-machine="a100-1"]');
  await page.screenshot({ path: `${shots}/backforward-history-forward.png`, fullPage: false });
});
