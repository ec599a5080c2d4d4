// What a person sees on the explainer pages: the invalidations of the demo's a100 upgrade
// grouped by cause (one section, a line per kernel, the entries behind a disclosure, paged), one invalidated entry
// followed to its compare view, another IR through htmx, then A's nearest neighbours.
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node explain.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

await run('explain', async (page) => {
  await page.goto(`${base}/invalidations?machine=a100-1`);
  const summary = await page.textContent('#summary');
  check(/45 of 45 entries recompiled after Triton 3\.4\.0 → 3\.5\.1; 0 had identical binaries/.test(summary), `invalidations summary: ${summary.trim().replace(/\s+/g, " ")}`);
  check(await page.isVisible('#scan-picker'), 'scan picker shown');
  check(/Triton will miss on them/.test(await page.textContent('#relocated')), 'relocated entries flagged');
  const group = page.locator('section#cause-compiler');
  check(await page.locator('section.cause-group').count() === 1, 'one cause, one section (not 45 rows)');
  check(/45 recompiled/.test(await group.locator('h2').innerText()), 'the cause counts its 45 entries');
  check(await group.locator('ul.whys li').count() === 1, 'the reason is given once');
  check(await group.locator('tr.inv-kernel').count() === 4, 'a line per kernel: matmul, add, softmax, layernorm');
  check(!(await group.locator('tr.inv-row').first().isVisible()), 'entries behind a closed disclosure');
  await page.screenshot({ path: `${shots}/explain-invalidations.png`, fullPage: false });
  await group.locator('details > summary').click();
  check(await group.locator('tr.inv-row').count() === 20, 'first page: 20 entries');
  await page.screenshot({ path: `${shots}/explain-invalidations-open.png`, fullPage: false });
  // The next page through htmx: the URL is shareable and the disclosure stays open.
  await page.evaluate(() => { window.__sameDocument = true; });
  await group.locator('a.next').click();
  await page.waitForURL(/cause=compiler&page=2/);
  await page.waitForFunction(() => document.querySelector('#cause-compiler .pager')?.textContent.includes('21–40'));
  check(await page.evaluate(() => window.__sameDocument === true), 'paged by htmx, not a page load');
  check(await page.locator('#cause-compiler details.inv-entries[open]').count() === 1, 'the paged cause stays open');

  // A pair of machines never compared before: the report is computed in the background (the
  // server answers at once: --report-wait-ms 0), the page shows the progress and fills in by
  // itself, without a reload.
  await page.goto(`${base}/invalidations?a=mi300-1&b=a100-1`);
  check(/Computing this report/.test(await page.textContent('#inv')), 'a report being computed says so');
  await page.screenshot({ path: `${shots}/explain-invalidations-computing.png`, fullPage: false });
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.waitForSelector('#summary', { timeout: 20000 });
  const pair = await page.textContent('#summary');
  check(/kept|recompiled/.test(pair), `the pair's report filled in: ${pair.trim().replace(/\s+/g, ' ')}`);
  check(await page.evaluate(() => window.__sameDocument === true), 'filled in by htmx, not a page load');
  check(await page.textContent('h1') === 'Invalidations from mi300-1 to a100-1', 'the heading names the pair');
  await page.screenshot({ path: `${shots}/explain-invalidations-pair.png`, fullPage: false });

  // The fp-fusion pair: one env var that also sets an option is one cause, one line with its
  // count, no digest; the heading links the machines; the picker starts another report.
  await page.goto(`${base}/invalidations?a=h100-a&b=h100-c`);
  await page.waitForSelector('#summary', { timeout: 30000 });
  await page.reload(); // stored now: the whole page, with its picker
  const env = page.locator('section#cause-env');
  const whys = env.locator('ul.whys li');
  check(await whys.count() === 1, 'fp-fusion: one change, one line');
  const why = (await whys.first().innerText()).trim();
  check(/^TRITON_DEFAULT_FP_FUSION=false on B \(sets enable_fp_fusion false\); everything else equal \(\d+ entr(y|ies)\)$/.test(why), `fp-fusion reason with its count: ${why}`);
  const texts = (await page.textContent('#summary')) + why;
  check(!/[0-9a-f]{64}/.test(texts), 'no 64-digit hash in the summary lines');
  check(await page.locator('h1 a[href="/machines/h100-a"]').count() === 1 && await page.locator('h1 a[href="/machines/h100-c"]').count() === 1, 'the heading links both machines');
  await page.screenshot({ path: `${shots}/explain-invalidations-fpfusion.png`, fullPage: false });
  await page.selectOption('#pick-machines select[name=b]', 'a100-1');
  await Promise.all([page.waitForURL(/\/invalidations\?a=h100-a&b=a100-1/), page.click('#pick-machines button')]);
  check(true, 'the picker starts a report of two other machines');
  // The header's search box: a key's start as the grids show it opens its entry.
  const key = (await (await page.request.get(`${base}/api/v1/entries?machine=a100-1&limit=1`)).json())[0].key;
  await page.fill('header form.find input', `a100-1:${key.slice(0, 10)}`);
  await Promise.all([page.waitForURL(new RegExp(`/entries/a100-1/${key}$`)), page.press('header form.find input', 'Enter')]);
  check(true, `the search box opens a100-1:${key.slice(0, 10)}…`);

  // Follow one invalidated entry (a matmul, the most interesting IR) to its compare view.
  await page.goto(`${base}/invalidations?machine=a100-1&cause=compiler&page=1`);
  const row = page.locator('tr.inv-row', { hasText: 'matmul_kernel' }).first();
  const kernel = (await row.locator('td').first().textContent()).trim();
  await Promise.all([page.waitForURL(/\/compare\?a=a100-1:.*&b=a100-1:/), row.locator('a.compare').click()]);
  const headline = await page.textContent('#headline');
  check(/compiler/i.test(headline) && /Triton 3\.4\.0 → 3\.5\.1/.test(headline), `compare headline: ${headline.trim().replace(/\s+/g, ' ')}`);
  check((await page.textContent('body')).includes(kernel), `compare names ${kernel}`);
  const first = page.locator('#components tr').nth(1);
  check(/triton_version/.test(await first.textContent()), 'differing key input first');
  check(/differs/.test((await first.getAttribute('class')) ?? ''), 'highlighted');
  check((await page.locator('table.diff tr').count()) > 3, 'IR diff shown');
  await page.screenshot({ path: `${shots}/explain-compare.png`, fullPage: false });

  // Another IR through htmx: the URL changes (shareable) and the diff is swapped in.
  await page.click("p.picker a:text-is('ptx')");
  await page.waitForURL(/ir=ptx/);
  await page.waitForFunction(() => document.querySelector('#ir')?.textContent.includes('.ptx'));
  await page.evaluate(() => document.querySelector('#ir').scrollIntoView());
  await page.screenshot({ path: `${shots}/explain-compare-ptx.png`, fullPage: false });
  // A's nearest neighbours: ranked, each linking to its compare view.
  const href = await page.locator('a', { hasText: "A's nearest neighbours" }).getAttribute('href');
  const resp = await page.goto(`${base}${href}`);
  check(resp.status() === 200, `GET ${href}`);
  const rows = page.locator('#neighbours tr');
  check((await rows.count()) > 2, 'neighbours listed');
  check(/compare/.test(await rows.nth(1).textContent()), 'each neighbour links to its compare view');
  await page.screenshot({ path: `${shots}/explain-nearest.png`, fullPage: false });
});
