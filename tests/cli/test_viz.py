"""attnc viz: the heatmap's cells are the kernel's weights for the chosen head, batch entry and
ranges; the weights are checked against the reference; bad input is refused with no file."""
import os
import re
import struct
import unittest
import zlib

from common import CliTestCase, attnc, needs_backends, read_npy

# Viridis at nine even steps, as the heatmap interpolates it.
VIRIDIS = [0x440154, 0x472d7b, 0x3b528b, 0x2c728e, 0x21908c, 0x27ad81, 0x5dc863, 0xaadc32,
           0xfde725]
MASKED = (219, 219, 219)


def viridis(t):
    x = min(max(t, 0.0), 1.0) * 8
    k = min(int(x), 7)
    f = x - k
    a, b = VIRIDIS[k], VIRIDIS[k + 1]
    return tuple(((a >> s) & 255) + f * (((b >> s) & 255) - ((a >> s) & 255)) for s in (16, 8, 0))


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert (depth, color, body[12]) == (8, 2, 0), "expected 8-bit RGB, not interlaced"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3
    rows, previous = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for x in range(stride):
            left = row[x - 3] if x >= 3 else 0
            up = previous[x]
            corner = previous[x - 3] if x >= 3 else 0
            if kind == 1:
                row[x] = (row[x] + left) & 255
            elif kind == 2:
                row[x] = (row[x] + up) & 255
            elif kind == 3:
                row[x] = (row[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[x] = (row[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append([tuple(row[x:x + 3]) for x in range(0, stride, 3)])
        previous = row
    return width, height, rows


class Viz(CliTestCase):
    def tokens(self, name, count):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write("".join("tok%d\n" % i for i in range(count)))
        return path

    @needs_backends("halide")
    def test_cells_show_the_kernels_weights_of_the_chosen_slice(self):
        # GQA, Tq != Tk, bottom-right causal, a generated Halide kernel.
        out = os.path.join(self.tmp, "out")
        spec = "heads=4 kv_heads=2 d_k=16 mask=causal causal_align=bottom_right weights=true"
        bundle = self.expect(attnc("compile", spec, "--backend", "halide", "-o", out), 0)
        bundle = bundle.stdout.strip()
        sizes = ["--batch", "2", "--seq-q", "9", "--seq-k", "13", "--seed", "5"]
        image = os.path.join(self.tmp, "w.png")
        result = self.expect(attnc("viz", bundle, *sizes, "--head", "3", "--batch-entry", "1",
                                   "--query-range", "2:8", "--key-range", "1:", "--tokens",
                                   self.tokens("keys.txt", 13), "--query-tokens",
                                   self.tokens("queries.txt", 9), "-o", image),
                             0, "weights match the f64 reference", "6 queries x 12 keys")
        cell, left, top = map(float, re.search(r"cells of (\S+) px from \((\S+), (\S+)\)",
                                               result.stdout).groups())
        weights = os.path.join(self.tmp, "w.npy")
        self.expect(attnc("run", bundle, *sizes, "--weights", weights), 0)
        _, shape, values = read_npy(weights)
        self.assertEqual(shape, (2, 4, 9, 13))
        drawn = [[values[((1 * 4 + 3) * 9 + i) * 13 + j] for j in range(1, 13)]
                 for i in range(2, 8)]
        largest = max(max(row) for row in drawn)
        _, _, pixels = read_png(image)
        for r, row in enumerate(drawn):
            for c, w in enumerate(row):
                i, j = 2 + r, 1 + c
                want = MASKED if j > i + 13 - 9 else viridis(w / largest)
                got = pixels[int(top + (r + 0.5) * cell)][int(left + (c + 0.5) * cell)]
                for g, e in zip(got, want):
                    self.assertLessEqual(abs(g - e), 1.5, "cell (%d, %d)" % (i, j))

    def test_svg_and_linformer_projected_keys(self):
        bundle = self.compile("variant=linformer heads=2 d_k=8 proj_len=5 weights=true")
        image = os.path.join(self.tmp, "w.svg")
        self.expect(attnc("viz", bundle, "--tokens", self.tokens("t.txt", 11), "-o", image), 0,
                    "11 queries x 5 keys")
        with open(image) as f:
            self.assertIn("<svg", f.read(200))

    def test_no_check_skips_the_reference(self):
        bundle = self.compile("heads=1 d_k=8 weights=true")
        image = os.path.join(self.tmp, "w.png")
        result = self.expect(attnc("viz", bundle, "--seq-q", "4", "--no-check", "-o", image), 0)
        self.assertNotIn("reference", result.stdout)
        self.assertTrue(os.path.isfile(image))

    def test_bad_input_is_refused_and_writes_nothing(self):
        plain = self.compile("heads=2 d_k=8")
        bundle = self.compile("heads=2 d_k=8 mask=causal weights=true")
        image = os.path.join(self.tmp, "w.png")
        cases = [
            ((plain, "--seq-q", "4"), "weights=true"),
            ((bundle, "--seq-q", "4", "-o", os.path.join(self.tmp, "w.jpg")), ".png or .svg"),
            ((bundle, "--seq-q", "4", "--head", "2"), "--head 2: must be in 0..1"),
            ((bundle, "--seq-q", "4", "--batch-entry", "1"), "--batch-entry 1: must be in 0..0"),
            ((bundle, "--seq-q", "4", "--query-range", "3:2"), "non-empty range within 0:4"),
            ((bundle, "--seq-q", "4", "--key-range", "0:x"), "'x' is not a position"),
            ((bundle, "--seq-q", "4", "--query-range", "3"), "expected FIRST:END"),
            ((bundle, "--seq-q", "600"), "at most 512 per axis"),
            ((bundle, "--seq-q", "4", "--tokens", self.tokens("t.txt", 5)),
             "--tokens has 5 tokens, but this call has 4 queries"),
            ((bundle, "--tokens", os.path.join(self.tmp, "missing.txt")), "cannot read it"),
        ]
        for args, message in cases:
            with self.subTest(message=message):
                if "-o" not in args:
                    args = args + ("-o", image)
                self.expect(attnc("viz", *args), 2, message)
                self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("w.")], [])


if __name__ == "__main__":
    unittest.main()
