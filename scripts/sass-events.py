#!/usr/bin/env python3
"""The order of a kernel's asynchronous-MMA events in an sm_90a cubin, without a
disassembler (this machine has ptxas, no cuobjdump / nvdisasm).

usage: sass-events.py CUBIN

Prints, per .text section, the offsets of runs of: H (HGMMA: wgmma), A
(WARPGROUP.ARRIVE: wgmma.fence), Wn (WARPGROUP.DEPBAR.LE gsb0, n:
wgmma.wait_group n), M (MUFU: ex2 and friends) and B (BAR.SYNC / BAR.ARV:
named barriers), e.g. "56a0:W1 6c40:Mx90 7fb0:W0": the softmax's 90
exponentials between the wait for S and the wait for P V.  bench/NOTES.md
#97 is what it was made for: ptxas had put the W0 ahead of the Mx90.

The classes come from the low 12 bits of each 128-bit instruction (and the
DEPBAR count from the second word), read off cuobjdump -sass of CUDA 13
sm_90a cubins; another ptxas or arch may encode them otherwise, so check a
new toolchain against cuobjdump once.  Get a cubin with
  CKJIT_DUMP_DIR=D ckjit-prewarm --arch sm_90 SPEC
  nvcc -std=c++17 -arch=sm_90a -cubin -I kernel_src -o k.cubin D/*.cu
"""
import struct
import sys

HGMMA, WARPGROUP, MUFU = (0x9f0, 0xdf0), 0x9c5, 0x308
BAR = (0x31d, 0x51d, 0x71d, 0x91d, 0xb1d)


def sections(data):
    """(name, bytes) of each ELF64 section."""
    shoff, = struct.unpack_from('<Q', data, 0x28)
    size, count, names = struct.unpack_from('<HHH', data, 0x3a)
    heads = [struct.unpack_from('<IIQQQQ', data, shoff + i * size) for i in range(count)]
    strtab = heads[names][4]
    for name, _, _, _, off, length in heads:
        end = data.index(b'\0', strtab + name)
        yield data[strtab + name:end].decode(), data[off:off + length]


def event(w0, w1):
    op = w0 & 0xfff
    if op in HGMMA:
        return 'H'
    if op == WARPGROUP:
        return 'W%d' % ((w1 >> 8) & 0xff) if (w0 >> 47) & 1 else 'A'
    if op == MUFU:
        return 'M'
    if op in BAR:
        return 'B'
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF':
        sys.exit(f'{sys.argv[1]}: not an ELF file (a cubin)')
    for name, code in sections(data):
        if not name.startswith('.text.'):
            continue
        runs = []  # [offset, event, count]
        for pc in range(0, len(code) - 15, 16):
            e = event(*struct.unpack_from('<QQ', code, pc))
            if e and runs and runs[-1][1] == e:
                runs[-1][2] += 1
            elif e:
                runs.append([pc, e, 1])
        print(name[6:] + ': ' + ' '.join('%x:%s%s' % (pc, e, 'x%d' % n if n > 1 else '')
                                         for pc, e, n in runs))


if __name__ == '__main__':
    main()
