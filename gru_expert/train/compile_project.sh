# Sourced by record_host.sh and (its text, into the guest's script) record_vm.sh: the compile
# load's small C project. compile_project DIR writes 24 files and a Makefile into DIR, rebuilt
# in a loop with make -jN by the recorders. No #include: the lab guest has gcc but no libc
# headers.
compile_project() {
  for i in $(seq 1 24); do
    {
      echo "static double f$i(double x) { double s = 0; for (int k = 0; k < 64; k++) s += x * k / (k + 1.0); return s; }"
      echo "double g$i(double x) { return f$i(x) + f$i(x / 2); }"
    } > "$1/u$i.c"
  done
  printf 'OBJS=%s\nall: $(OBJS)\n%%.o: %%.c\n\tgcc -O2 -c $< -o $@\nclean:\n\trm -f *.o\n' \
    "$(for i in $(seq 1 24); do printf 'u%s.o ' "$i"; done)" > "$1/Makefile"
}
