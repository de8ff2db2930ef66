/* A return address's unwind rule, read from its object's .eh_frame through .eh_frame_hdr: where
 * the caller's frame starts (the CFA) and where the caller's frame pointer was saved, as libgcc's
 * unwinder would find them (x86-64). What the stack walker (stackwalk.c) caches per thread. */
#ifndef GM_CFI_H
#define GM_CFI_H

#include <stdint.h>

/* DWARF register numbers on x86-64. */
#define DW_REG_BP 6
#define DW_REG_SP 7
#define DW_REG_RA 16

enum cfa_kind { CFA_NONE, CFA_SP, CFA_BP, CFA_DEREF_BP, CFA_END, CFA_FAIL };
enum bp_kind { BP_SAME, BP_AT_CFA, BP_AT_BP };

typedef struct rule {
    uintptr_t pc; /* the return address this rule is for; 0: an empty slot */
    int32_t cfa_off;
    int16_t bp_off;
    uint8_t cfa_kind, bp_kind;
} rule_t;

/* The rule of return address `ra` (its frame's pc is ra - 1, inside the call): CFA_END where the
 * unwinder stops too (no table entry in a loaded object, the return address undefined),
 * CFA_FAIL where backtrace() must decide (a rule beyond this reader, code in no loaded object). */
rule_t cfi_rule_for(uintptr_t ra);

#endif
