/* An empty stand-in for site-packages/torch/lib/libtorch_cuda.so: loading it lets the tests
 * check that gmshim looks for the CUPTI wheel next to a loaded PyTorch. Test code only. */
int fake_torch_loaded(void);

int fake_torch_loaded(void)
{
    return 1;
}
