// The tile geometry of the mma.sync pipelines (mma.cu, tf32.cu; each
// defines THREADS): WM x WN warps, each with a WTM x WTN warp tile of
// MT x NT mma fragments, and the shared-memory operand tiles of a stage.
#pragma once

#define WTM (BM / WM) // warp tile
#define WTN (BN / WN)
#define MT (WTM / 16) // mma fragments per warp
#define NT (WTN / 8)

// An operand tile is ROWS x COLS elements with COLS contiguous: BM x BK for
// a K-contiguous A, BK x BM for an M-contiguous one (likewise B with BN).
#define A_ROWS (A_KCONTIG ? BM : BK)
#define A_COLS (A_KCONTIG ? BK : BM)
#define B_ROWS (B_KCONTIG ? BN : BK)
#define B_COLS (B_KCONTIG ? BK : BN)
#define A_TILE (A_ROWS * A_COLS)
#define B_TILE (B_ROWS * B_COLS)
#define STAGE_ELEMS (A_TILE + B_TILE)
