# disasm_util.sh, sourced by the disassembly checks: function_body FUNCTION
# OBJECT prints FUNCTION's instructions in OBJECT, one a line, addresses
# stripped (e.g. "shr    %rax").
function_body() {
    objdump -d --no-show-raw-insn "$2" | awk -v f="<$1>:" '$2 == f {on = 1; next} on && /^$/ {exit} on' |
        grep -E '^ +[0-9a-f]+:' | sed -E 's/^ +[0-9a-f]+:[[:space:]]+//'
}
