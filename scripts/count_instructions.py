# gdb script: counts the machine instructions of one iteration of examples/hot_loop.rs
# (one get + one drop from the thread cache, in steady state), by single-stepping from one
# entry into the fast path to the next, and attributes them to the (inlined) functions.
# Debug info (line tables) is needed to find the inlined fast path; it does not change codegen.
#
#   CARGO_PROFILE_RELEASE_DEBUG=1 cargo build --release -p tierpool --example hot_loop
#   gdb -q -batch -x scripts/count_instructions.py target/release/examples/hot_loop
import gdb

gdb.execute("set pagination off")
gdb.execute("break tierpool::local::fast_get")
gdb.execute("run 4096 3000 > /dev/null")
gdb.execute("ignore 1 1000")  # well past warm-up
gdb.execute("continue")
start = int(gdb.parse_and_eval("$pc"))
n = 0
per_function = {}
while True:
    gdb.execute("stepi", to_string=True)
    n += 1
    name = gdb.selected_frame().name() or "?"
    per_function[name] = per_function.get(name, 0) + 1
    if int(gdb.parse_and_eval("$pc")) == start or n > 10000:
        break
print(f"instructions per get+drop: {n}")
for name, count in sorted(per_function.items(), key=lambda kv: -kv[1])[:25]:
    print(f"{count:5} {name}")
