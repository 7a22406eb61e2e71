// The code shown in the documentation, compiled and run so that it cannot rot.
// The pages show the regions between `//! [name]` markers as plain ```cpp
// blocks, copied by hand so that they read well on GitHub (Doxygen's \snippet
// would show there as a raw command); the regions start at column 0, as the
// copies do. The tests keep the copies exact: docs.page_snippets checks that
// each ```cpp block of a docs/ page that names this file (getting_started.md)
// is a region, or regions separated by a blank line, and docs.readme_first_look
// that README.md's "A first look" block is first_look_head, then first_look.
//
// `docs_snippets` runs every region and exits with status 1 when a result is
// not what the pages say it is (the test docs.snippets).
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

//! [first_look_head]
#include <tiny/tiny.h>
namespace F = tiny::nn::functional;
//! [first_look_head]

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "docs_snippets: " << what << "\n";
    ++failures;
  }
}

// Runs `region` with std::cout captured, echoes what it printed, and returns it.
template <typename Region>
std::string captured(const char* name, Region region) {
  std::ostringstream out;
  std::streambuf* const saved = std::cout.rdbuf(out.rdbuf());
  try {
    region();
  } catch (...) {
    std::cout.rdbuf(saved);
    throw;
  }
  std::cout.rdbuf(saved);
  std::cout << "[" << name << "]\n" << out.str();
  return out.str();
}

// README.md's "A first look at tiny": one linear layer, a loss, its gradient.
void first_look() {
  const std::string printed = captured("first_look", [] {
//! [first_look]
tiny::manual_seed(0);                                    // torch.manual_seed(0)
auto x = tiny::randn({64, 784});                         // torch.randn(64, 784)
auto w = tiny::randn({10, 784}).mul(0.01).requires_grad_();
auto y = tiny::randint(0, 10, {64});                     // class indices, int64
auto loss = F::cross_entropy(F::linear(x, w), y);        // F.cross_entropy(F.linear(x, w), y)
loss.backward();
std::cout << loss.item<float>() << " " << w.grad().sizes()[1] << "\n";
//! [first_look]
  });
  float loss = 0;
  long columns = 0;
  std::istringstream(printed) >> loss >> columns;
  // Ten classes and small random weights: the loss is near ln(10) = 2.30.
  expect(loss > 1.5f && loss < 3.5f, "first_look: a loss near ln(10) = 2.30 was expected, printed " + printed);
  expect(columns == 784, "first_look: w.grad() has 784 columns, printed " + printed);
}

// getting_started.md: PyTorch's opening line, and what the GPUs are.
tiny::Device pick_device() {
  tiny::Device chosen("cpu");
  const std::string printed = captured("pick_device", [&] {
//! [pick_device]
// device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
tiny::Device device = tiny::cuda::is_available() ? tiny::Device("cuda:0") : tiny::Device("cpu");

for (int i = 0; i < tiny::cuda::device_count(); ++i) {
  tiny::cuda::DeviceProperties p = tiny::cuda::get_device_properties(i);
  std::cout << "cuda:" << i << "  " << p.name << ", " << p.total_memory / (1024.0 * 1024 * 1024) << " GiB\n";
}
std::cout << "training on " << device << "\n";
//! [pick_device]
    chosen = device;
  });
  expect(printed.find("training on " + chosen.str()) != std::string::npos,
         "pick_device: the device line is missing, printed:\n" + printed);
  expect(tiny::cuda::device_count() == 0 || chosen.is_cuda(), "pick_device: a GPU exists but the CPU was chosen");
  return chosen;
}

// getting_started.md: a model, its data and the loop on that device.
void train_on(const tiny::Device& device) {
  double trained = 0;
  bool on_device = false;
  const std::string printed = captured("train_on_device", [&] {
//! [train_on_device]
namespace nn = tiny::nn;
tiny::manual_seed(0);
auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(20, 64), std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Linear>(64, 3));
model->to(device);                                        // model.to(device): parameters and buffers
tiny::optim::SGD optimizer(model->parameters(), tiny::optim::SGDOptions{0.1});

auto x = tiny::randn({128, 20}).to(device);               // the data goes to the same device
auto y = tiny::randint(0, 3, {128}).to(device);
for (int step = 0; step < 50; ++step) {
  optimizer.zero_grad();
  tiny::Tensor loss = F::cross_entropy((*model)(x), y);
  loss.backward();
  optimizer.step();
  if (step % 10 == 0) std::cout << "step " << step << "  loss " << loss.item<double>() << "\n";  // .item() waits
}
//! [train_on_device]
    tiny::NoGradGuard no_grad;
    const tiny::Tensor logits = (*model)(x);
    on_device = model->parameters().front().device() == device && logits.device() == device;
    trained = F::cross_entropy(logits, y).item<double>();
  });
  expect(on_device, "train_on_device: the model and its output should be on " + device.str());
  double initial = 0;
  std::string word;
  int step = -1;
  std::istringstream lines(printed);
  lines >> word >> step >> word >> initial;  // "step 0  loss <initial>"
  expect(step == 0 && trained < 0.9 * initial, "train_on_device: 50 SGD steps should lower the loss by 10% or more; "
                                               "it went from " + std::to_string(initial) + " to " +
                                               std::to_string(trained));
}

}  // namespace

int main() {
  try {
    first_look();
    train_on(pick_device());
  } catch (const std::exception& e) {
    std::cerr << "docs_snippets: " << e.what() << "\n";
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
