/* Prints the library version and loads a model given on the command line: proves that the
 * installed header and libraries work for a consumer. */
#include <stdio.h>
#include <string.h>

#include <kestrel/kestrel.h>

int main(int argc, char** argv) {
  if (kestrel_abi_version() != KESTREL_ABI_VERSION) return 2;
  printf("kestrel %s\n", kestrel_version());
  if (argc > 1) {
    kestrel_model* model = NULL;
    kestrel_status st = kestrel_model_load(argv[1], NULL, &model);
    if (st != KESTREL_OK) {
      fprintf(stderr, "load: %s\n", kestrel_last_error());
      return 1;
    }
    kestrel_model_info info;
    info.struct_size = sizeof(info);
    kestrel_model_get_info(model, &info);
    printf("%s %d layers\n", info.architecture, info.n_layers);
    kestrel_model_free(model);
  }
  return 0;
}
