// The /autotune page as a person reads it: Triton configs as block sizes, warps and stages (not
// raw JSON), and nothing wider than the viewport (every element's right edge inside it, the
// page not scrollable sideways).
//
// Usage: BASE_URL=http://127.0.0.1:PORT SCREENSHOTS=dir node autotune.mjs (or scripts/browser-test.sh)
import { base, check, run, shots } from './lib.mjs';

await run('autotune', async page => {
  for (const width of [1360, 1024]) {
    await page.setViewportSize({ width, height: 900 });
    await page.goto(`${base}/autotune`);
    const rows = await page.locator('#decision-list tr.decision').count();
    check(rows > 0, `${width}px: ${rows} decisions listed`);
    const winners = await page.locator('#decision-list td.winner').allInnerTexts();
    const triton = winners.filter(w => w.includes('warps'));
    check(triton.length > 0 && triton.every(w => /stages/.test(w) && !w.includes('{')),
      `${width}px: Triton configs readable: ${triton[0]}`);
    check(winners.every(w => !w.includes('"kwargs"')), `${width}px: no raw JSON config shown`);
    const over = await page.evaluate(() => {
      const vw = document.documentElement.clientWidth;
      return [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > vw + 0.5)
        .map(e => `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().right)}px`);
    });
    check(over.length === 0, `${width}px: no element past the viewport ${over.slice(0, 5).join('; ')}`);
    check(await page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth),
      `${width}px: no sideways scroll`);
    await page.screenshot({ path: `${shots}/autotune-${width}.png`, fullPage: true });
  }
});
