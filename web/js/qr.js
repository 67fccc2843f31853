// A QR code drawn on a canvas (qrcode-generator, from vendor/vendor.js, loaded the first time
// one is drawn): the Shares screen's share link, for the other person's phone camera.  Drawn
// module by module from isDark, with the 4-module quiet zone a reader needs; no markup from
// the library reaches the page.

/**
 * @param {HTMLCanvasElement} canvas
 * @param {string} text what the code holds (a URL: byte mode)
 * @param {number} [scale] pixels per module
 */
export async function drawQr(canvas, text, scale = 5) {
  const { loadQr } = await import('../vendor/vendor.js');
  const qrcode = await loadQr();
  const code = qrcode(0, 'M');
  code.addData(text, 'Byte');
  code.make();
  const n = code.getModuleCount();
  const quiet = 4;
  const size = (n + 2 * quiet) * scale;
  canvas.width = size;
  canvas.height = size;
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext('2d'));
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, size, size);
  ctx.fillStyle = '#000';
  for (let r = 0; r < n; r += 1) {
    for (let c = 0; c < n; c += 1) {
      if (code.isDark(r, c)) ctx.fillRect((c + quiet) * scale, (r + quiet) * scale, scale, scale);
    }
  }
  canvas.dataset.text = text;
}
