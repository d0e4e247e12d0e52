#include "codegen/CodeGenLLVM.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/LLVMHeaders.h"
#include "codegen/VectorMath.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"

namespace tessel {
namespace {

// Scratch buffers up to this size live on the stack (entry-block allocas, which LLVM can
// promote to registers); larger ones come from the heap.
constexpr int64_t kMaxStackBytes = 256 * 1024;

// Whether e is a floating-point +0 (or a vector of them).
bool is_float_zero(const Expr& e) {
  if (const Broadcast* b = e.as<Broadcast>()) return is_float_zero(b->value);
  const FloatImm* f = e.as<FloatImm>();
  return f && f->value == 0 && !std::signbit(f->value);
}

class CodeGen {
 public:
  CodeGen(llvm::LLVMContext& ctx, llvm::Module& mod, const Target& target, bool libm_math)
      : ctx_(ctx), mod_(mod), b_(ctx), target_(target), libm_math_(libm_math) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);  // a*b+c may become one FMA
    b_.setFastMathFlags(fmf);
  }

  void emit_kernel(const LoweredProgram& prog) {
    const std::string& name = prog.func.name;
    index_errors_ = &prog.func.index_errors;
    llvm::Type* ptr = b_.getPtrTy();
    // name_impl(noalias ptr...) holds the body.
    std::vector<llvm::Type*> params(prog.args.size(), ptr);
    auto* impl_ty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    llvm::Function* impl = llvm::Function::Create(impl_ty, llvm::Function::InternalLinkage, name + "_impl", mod_);
    set_attrs(impl);
    for (size_t i = 0; i < prog.args.size(); ++i) {
      impl->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
      impl->getArg(unsigned(i))->setName(prog.args[i].buffer.name());
    }
    begin_function(impl);
    for (size_t i = 0; i < prog.args.size(); ++i) {
      vars_[prog.args[i].buffer.get()] = impl->getArg(unsigned(i));
      buffer_type_[prog.args[i].buffer.get()] = prog.args[i].op->dtype;
      int64_t elems = 1;
      for (int64_t d : prog.args[i].op->shape) elems *= d;
      buffer_elems_[prog.args[i].buffer.get()] = elems;
    }
    find_updated_buffers(prog.func.body);
    emit(prog.func.body);
    b_.CreateRetVoid();
    end_function();

    // The exported entry: unpack the argument array and call the body.
    auto* entry_ty = llvm::FunctionType::get(b_.getInt32Ty(), {ptr}, false);
    llvm::Function* entry = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, name, mod_);
    set_attrs(entry);
    auto* bb = llvm::BasicBlock::Create(ctx_, "entry", entry);
    b_.SetInsertPoint(bb);
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < prog.args.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, entry->getArg(0), i);
      args.push_back(b_.CreateLoad(ptr, slot));
    }
    b_.CreateCall(impl, args);
    b_.CreateRet(b_.getInt32(0));
  }

 private:
  struct FunctionState {
    llvm::Function* fn = nullptr;
    llvm::BasicBlock* entry = nullptr;
    std::unordered_map<const ExprNode*, llvm::Value*> vars;
    std::unordered_map<const ExprNode*, DType> buffer_type;
    llvm::IRBuilderBase::InsertPoint ip;
    bool in_parallel = false;
  };

  void set_attrs(llvm::Function* f) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    if (!target_.cpu.empty()) f->addFnAttr("target-cpu", target_.cpu);
    // LLVM 19 can give a gather (vgatherqps) the same register as destination and index,
    // which the CPU rejects as an illegal instruction (found by the tuner: a conv2d with its
    // padding inlined, vectorized 21 wide). Loads and stores of scattered lanes are made
    // scalar instead; the tuned kernels of this CPU ran no slower.
    std::string features = target_.features;
    if (llvm::Triple(llvm::sys::getProcessTriple()).isX86())
      features += std::string(features.empty() ? "" : ",") + "+prefer-no-gather,+prefer-no-scatter";
    if (!features.empty()) f->addFnAttr("target-features", features);
    // Divisions marked `arcp` and `ninf` (the vector math's, never a user's) as a reciprocal
    // estimate and one Newton step.
    f->addFnAttr("reciprocal-estimates", "vec-divf:1,divf:1");
    // Our vectors are explicit; let the back end keep 512-bit registers for them.
    if (target_.avx512()) {
      f->addFnAttr("prefer-vector-width", "512");
      f->addFnAttr("min-legal-vector-width", "512");
    }
  }

  void begin_function(llvm::Function* f) {
    fn_ = f;
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", f);
    auto* body = llvm::BasicBlock::Create(ctx_, "body", f);
    b_.SetInsertPoint(entry_);
    b_.CreateBr(body);
    b_.SetInsertPoint(body);
  }
  void end_function() {}

  // ---- types ----

  llvm::Type* scalar_type(DType t) {
    switch (t.code) {
      case DType::Float: return t.bits == 16 ? b_.getHalfTy() : t.bits == 64 ? b_.getDoubleTy() : b_.getFloatTy();
      case DType::Int:
      case DType::UInt: return b_.getIntNTy(t.bits);
      case DType::Bool: return b_.getInt1Ty();
      case DType::Handle: return b_.getPtrTy();
    }
    return nullptr;
  }
  // Scalar int32 values (loop counters and index arithmetic) are computed in 64 bits, the
  // width of an address: left at 32, LLVM's IndVarSimplify widened every counter itself,
  // a third of the optimiser's time (376 -> 267 ms a conv2d candidate; same kernel speed).
  // Vectors of int32 stay 32-bit (see element_ptr).
  llvm::Type* type(DType t) {
    if (t.lanes == 1 && t.code == DType::Int && t.bits == 32) return b_.getInt64Ty();
    llvm::Type* s = scalar_type(t.element_of());
    return t.lanes > 1 ? llvm::FixedVectorType::get(s, t.lanes) : s;
  }
  // A scalar as the element of a vector of type t (a wide int32 goes back to 32 bits).
  llvm::Value* lane_value(llvm::Value* v, DType t) {
    llvm::Type* e = scalar_type(t.element_of());
    return v->getType() == e ? v : b_.CreateTrunc(v, e);
  }
  // Bools are bytes in memory.
  llvm::Type* mem_type(DType t) {
    llvm::Type* s = t.is_bool() ? b_.getInt8Ty() : scalar_type(t.element_of());
    return t.lanes > 1 ? llvm::FixedVectorType::get(s, t.lanes) : s;
  }

  // ---- expressions ----

  llvm::Value* emit(const Expr& e) {
    const ExprNode* n = e.get();
    switch (n->kind) {
      case NodeKind::IntImm:
        return llvm::ConstantInt::get(type(n->type), uint64_t(static_cast<const IntImm*>(n)->value), true);
      case NodeKind::FloatImm: return llvm::ConstantFP::get(type(n->type), static_cast<const FloatImm*>(n)->value);
      case NodeKind::Variable: {
        auto it = vars_.find(n);
        TESSEL_INTERNAL_CHECK(it != vars_.end(), "variable '", static_cast<const VarNode*>(n)->name,
                              "' used outside its definition");
        return it->second;
      }
      case NodeKind::Cast: return emit_cast(static_cast<const Cast*>(n)->value, n->type);
      case NodeKind::Add: return arith(n, llvm::Instruction::Add, llvm::Instruction::FAdd);
      case NodeKind::Sub: return arith(n, llvm::Instruction::Sub, llvm::Instruction::FSub);
      case NodeKind::Mul: return arith(n, llvm::Instruction::Mul, llvm::Instruction::FMul);
      case NodeKind::Div:
        return arith(n, n->type.is_uint() ? llvm::Instruction::UDiv : llvm::Instruction::SDiv, llvm::Instruction::FDiv);
      case NodeKind::Mod:
        return arith(n, n->type.is_uint() ? llvm::Instruction::URem : llvm::Instruction::SRem, llvm::Instruction::FRem);
      case NodeKind::Min:
      case NodeKind::Max: {
        auto* bn = static_cast<const BinaryNode*>(n);
        return min_max(n->kind == NodeKind::Min, bn->a.dtype(), emit(bn->a), emit(bn->b));
      }
      case NodeKind::EQ:
      case NodeKind::NE:
      case NodeKind::LT:
      case NodeKind::LE:
      case NodeKind::GT:
      case NodeKind::GE: return compare(static_cast<const BinaryNode*>(n));
      case NodeKind::And: {
        auto* bn = static_cast<const BinaryNode*>(n);
        return b_.CreateAnd(emit(bn->a), emit(bn->b));
      }
      case NodeKind::Or: {
        auto* bn = static_cast<const BinaryNode*>(n);
        return b_.CreateOr(emit(bn->a), emit(bn->b));
      }
      case NodeKind::Not: return b_.CreateNot(emit(static_cast<const Not*>(n)->a));
      case NodeKind::Select: {
        auto* s = static_cast<const Select*>(n);
        // A padded window's tap, select(c, X[i] if c, 0), dense or strided: the masked load
        // alone, whose inactive lanes read as zero (a zero-masking load), where LLVM turned the
        // select with a constant mask into a blend (or an and) after the load, one more
        // instruction a tap.
        const Load* l = s->t.as<Load>();
        Expr base;
        if (l && l->predicate.defined() && l->type.is_vector() && (dense(l->index, &base) || small_stride(l->index)) &&
            is_float_zero(s->f) && equal(l->predicate, s->cond))
          return load(l);
        return b_.CreateSelect(emit(s->cond), emit(s->t), emit(s->f));
      }
      case NodeKind::Call: return call(static_cast<const Call*>(n));
      case NodeKind::Load: return load(static_cast<const Load*>(n));
      case NodeKind::Ramp: {
        auto* r = static_cast<const Ramp*>(n);
        llvm::Value* base = b_.CreateVectorSplat(r->lanes, lane_value(emit(r->base), n->type));
        llvm::Value* stride = b_.CreateVectorSplat(r->lanes, lane_value(emit(r->stride), n->type));
        std::vector<llvm::Constant*> lanes;
        for (int i = 0; i < r->lanes; ++i) lanes.push_back(llvm::ConstantInt::get(scalar_type(r->base.dtype()), i));
        return b_.CreateAdd(base, b_.CreateMul(stride, llvm::ConstantVector::get(lanes)));
      }
      case NodeKind::Broadcast: {
        auto* bc = static_cast<const Broadcast*>(n);
        return b_.CreateVectorSplat(bc->lanes, lane_value(emit(bc->value), n->type));
      }
      case NodeKind::Let: {
        auto* l = static_cast<const Let*>(n);
        vars_[l->var.get()] = emit(l->value);
        llvm::Value* v = emit(l->body);
        vars_.erase(l->var.get());
        return v;
      }
      case NodeKind::TensorLoad:
      case NodeKind::Reduce: throw InternalError("codegen: unlowered tensor access or reduction");
      default: throw InternalError("codegen: unknown expression");
    }
  }

  llvm::Value* min_max(bool is_min, DType t, llvm::Value* a, llvm::Value* c) {
    llvm::Value* cmp;
    if (t.is_float()) cmp = is_min ? b_.CreateFCmpOLT(a, c) : b_.CreateFCmpOGT(a, c);
    else if (t.is_uint() || t.is_bool()) cmp = is_min ? b_.CreateICmpULT(a, c) : b_.CreateICmpUGT(a, c);
    else cmp = is_min ? b_.CreateICmpSLT(a, c) : b_.CreateICmpSGT(a, c);
    return b_.CreateSelect(cmp, a, c);
  }

  // The lanes of v (element type t, float16 as float) combined: halves combined lane by lane
  // until one is left, an odd lane out set aside and combined last.
  llvm::Value* vector_reduce(Combiner comb, DType t, llvm::Value* v) {
    auto op = [&](llvm::Value* a, llvm::Value* c) -> llvm::Value* {
      switch (comb) {
        case Combiner::Sum: return t.is_float() ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
        case Combiner::Prod: return t.is_float() ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
        case Combiner::Min: return min_max(true, t, a, c);
        case Combiner::Max: return min_max(false, t, a, c);
      }
      throw InternalError("codegen: unknown combiner");
    };
    auto lanes = [&](int from, int n) {
      std::vector<int> idx(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) idx[size_t(i)] = from + i;
      return b_.CreateShuffleVector(v, idx);
    };
    llvm::Value* odd = nullptr;
    int n = int(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements());
    for (; n > 2; n /= 2) {
      if (n % 2) {
        llvm::Value* last = b_.CreateExtractElement(v, uint64_t(n - 1));
        odd = odd ? op(odd, last) : last;
        v = lanes(0, --n);
      }
      v = op(lanes(0, n / 2), lanes(n / 2, n / 2));
    }
    llvm::Value* r = b_.CreateExtractElement(v, uint64_t(0));
    if (n == 2) r = op(r, b_.CreateExtractElement(v, uint64_t(1)));
    if (odd) r = op(r, odd);
    return r->getType() == type(t) ? r : b_.CreateSExt(r, type(t));  // scalar int32 is carried as i64
  }

  llvm::Value* arith(const ExprNode* n, llvm::Instruction::BinaryOps iop, llvm::Instruction::BinaryOps fop) {
    auto* bn = static_cast<const BinaryNode*>(n);
    llvm::Value* a = emit(bn->a);
    llvm::Value* c = emit(bn->b);
    if (n->type.is_float()) {
      if (n->type.bits == 16) {  // computed in float, stored as half
        llvm::Type* f32 = type(float32.with_lanes(n->type.lanes));
        llvm::Value* r = b_.CreateBinOp(fop, b_.CreateFPExt(a, f32), b_.CreateFPExt(c, f32));
        return b_.CreateFPTrunc(r, type(n->type));
      }
      return b_.CreateBinOp(fop, a, c);
    }
    llvm::Value* r = b_.CreateBinOp(iop, a, c);
    // Signed index arithmetic does not wrap (as in Halide and TVM): with `nsw` LLVM folds
    // constant offsets into addressing modes. Without it a 3x3 conv2d inner loop spent a
    // lea + movslq on every weight load (446 instructions for 128 FMAs; 382 with it).
    bool signed_index = n->type.is_int() && n->type.bits >= 32;
    bool can_overflow = iop == llvm::Instruction::Add || iop == llvm::Instruction::Sub || iop == llvm::Instruction::Mul;
    if (auto* op = llvm::dyn_cast<llvm::BinaryOperator>(r); op && signed_index && can_overflow)
      op->setHasNoSignedWrap(true);
    return r;
  }

  llvm::Value* compare(const BinaryNode* n) {
    llvm::Value* a = emit(n->a);
    llvm::Value* c = emit(n->b);
    DType t = n->a.dtype();
    using P = llvm::CmpInst::Predicate;
    P p;
    bool f = t.is_float(), u = t.is_uint() || t.is_bool();
    switch (n->kind) {
      case NodeKind::EQ: p = f ? P::FCMP_OEQ : P::ICMP_EQ; break;
      case NodeKind::NE: p = f ? P::FCMP_UNE : P::ICMP_NE; break;
      case NodeKind::LT: p = f ? P::FCMP_OLT : u ? P::ICMP_ULT : P::ICMP_SLT; break;
      case NodeKind::LE: p = f ? P::FCMP_OLE : u ? P::ICMP_ULE : P::ICMP_SLE; break;
      case NodeKind::GT: p = f ? P::FCMP_OGT : u ? P::ICMP_UGT : P::ICMP_SGT; break;
      default: p = f ? P::FCMP_OGE : u ? P::ICMP_UGE : P::ICMP_SGE; break;
    }
    return f ? b_.CreateFCmp(p, a, c) : b_.CreateICmp(p, a, c);
  }

  llvm::Value* emit_cast(const Expr& value, DType to) {
    llvm::Value* v = emit(value);
    DType from = value.dtype();
    llvm::Type* t = type(to);
    if (from.element_of() == to.element_of()) return v;
    if (to.is_bool()) {
      if (from.is_float()) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
      return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (from.is_float() && to.is_float()) return to.bits > from.bits ? b_.CreateFPExt(v, t) : b_.CreateFPTrunc(v, t);
    if (from.is_float()) return to.is_uint() ? b_.CreateFPToUI(v, t) : b_.CreateFPToSI(v, t);
    bool from_signed = from.is_int();
    if (to.is_float()) return from_signed ? b_.CreateSIToFP(v, t) : b_.CreateUIToFP(v, t);
    return b_.CreateIntCast(v, t, from_signed);
  }

  llvm::Value* call(const Call* c) {
    if (c->op == Intrinsic::Prefetch) return prefetch(c->args[0].as<Load>());
    DType t = c->type;
    std::vector<llvm::Value*> args;
    for (auto& a : c->args) args.push_back(emit(a));
    if (c->op == Intrinsic::Skippable) return args[0];  // checking a skippable guard is always right
    if (c->op == Intrinsic::CheckIndex) return check_index(c, args);
    if (c->op == Intrinsic::VectorReduce) {
      auto comb = Combiner(c->args[1].as<IntImm>()->value);
      if (!(t.is_float() && t.bits == 16)) return vector_reduce(comb, t, args[0]);
      llvm::Type* f32 = type(float32.with_lanes(c->args[0].dtype().lanes));
      return b_.CreateFPTrunc(vector_reduce(comb, float32, b_.CreateFPExt(args[0], f32)), type(t));
    }
    // float16 math runs in float32.
    if (t.is_float() && t.bits == 16) {
      llvm::Type* f32 = type(float32.with_lanes(t.lanes));
      for (auto& a : args) a = b_.CreateFPExt(a, f32);
      return b_.CreateFPTrunc(call_f(c->op, float32.with_lanes(t.lanes), args), type(t));
    }
    return call_f(c->op, t, args);
  }

  // A read (for reading, kept in every cache level) of the line holding the element a Load
  // would read. The address may lie past the buffer (the iteration after the last one):
  // a prefetch never faults, so it is computed without LLVM's in-bounds promise.
  llvm::Value* prefetch(const Load* l) {
    TESSEL_INTERNAL_CHECK(l && vars_.count(l->buffer.get()) && l->type.is_scalar(), "prefetch of a scalar Load");
    llvm::Value* p = b_.CreateGEP(mem_type(buffer_type_.at(l->buffer.get())), vars_.at(l->buffer.get()),
                                  b_.CreateSExt(emit(l->index), b_.getInt64Ty()));
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()}, {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
    return b_.getInt32(0);
  }

  // A checked build's read: where the guard holds and the index (any lane of it) is outside
  // [0, extent), tessel_index_error(message) stops the program.
  llvm::Value* check_index(const Call* c, std::vector<llvm::Value*>& args) {
    llvm::Value *idx = args[0], *guard = args[2];
    const Expr& id_expr = c->args[3];
    const Broadcast* bc = id_expr.as<Broadcast>();
    int64_t id = 0;
    TESSEL_INTERNAL_CHECK(is_const_int(bc ? bc->value : id_expr, &id) && id >= 0 &&
                              size_t(id) < index_errors_->size(), "check_index: bad message id");
    llvm::Value* bad = b_.CreateOr(b_.CreateICmpSLT(idx, llvm::Constant::getNullValue(idx->getType())),
                                   b_.CreateICmpSGE(idx, args[1]));
    if (bad->getType()->isVectorTy() && !guard->getType()->isVectorTy())
      guard = b_.CreateVectorSplat(llvm::cast<llvm::VectorType>(bad->getType())->getElementCount(), guard);
    bad = b_.CreateAnd(bad, guard);
    if (bad->getType()->isVectorTy()) bad = b_.CreateOrReduce(bad);
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    auto* fail = llvm::BasicBlock::Create(ctx_, "index_error", fn);
    auto* ok = llvm::BasicBlock::Create(ctx_, "index_ok", fn);
    b_.CreateCondBr(bad, fail, ok);
    b_.SetInsertPoint(fail);
    llvm::FunctionCallee report = mod_.getOrInsertFunction("tessel_index_error", b_.getVoidTy(), b_.getPtrTy());
    b_.CreateCall(report, {b_.CreateGlobalStringPtr((*index_errors_)[size_t(id)])});
    b_.CreateUnreachable();
    b_.SetInsertPoint(ok);
    return idx;
  }

  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return b_.CreateUnaryIntrinsic(id, x);
  }

  // libm functions without an LLVM intrinsic, applied lane by lane.
  llvm::Value* libm(const char* fname32, const char* fname64, DType t, llvm::Value* x) {
    llvm::Type* st = scalar_type(t.element_of());
    llvm::FunctionCallee f = mod_.getOrInsertFunction(t.bits == 64 ? fname64 : fname32, st, st);
    if (t.lanes == 1) return b_.CreateCall(f, {x});
    llvm::Value* out = llvm::PoisonValue::get(type(t));
    for (int i = 0; i < t.lanes; ++i)
      out = b_.CreateInsertElement(out, b_.CreateCall(f, {b_.CreateExtractElement(x, i)}), i);
    return out;
  }

  llvm::Value* call_f(Intrinsic op, DType t, std::vector<llvm::Value*>& args) {
    llvm::Value* x = args[0];
    llvm::Value* one = llvm::ConstantFP::get(type(t), 1.0);
    if (t.is_float() && t.bits == 32 && !libm_math_) {  // straight-line code, vectorized with its loop (VectorMath.h)
      switch (op) {
        case Intrinsic::Exp: return emit_exp(b_, x);
        case Intrinsic::Log: return emit_log(b_, x);
        case Intrinsic::Tanh: return emit_tanh(b_, x);
        case Intrinsic::Erf: return emit_erf(b_, x);
        case Intrinsic::Sigmoid: return emit_sigmoid(b_, x);
        default: break;
      }
    }
    switch (op) {
      case Intrinsic::Exp: return intrinsic(llvm::Intrinsic::exp, x);
      case Intrinsic::Log: return intrinsic(llvm::Intrinsic::log, x);
      case Intrinsic::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
      case Intrinsic::Rsqrt: return b_.CreateFDiv(one, intrinsic(llvm::Intrinsic::sqrt, x));
      case Intrinsic::Abs: return intrinsic(llvm::Intrinsic::fabs, x);
      case Intrinsic::Floor: return intrinsic(llvm::Intrinsic::floor, x);
      case Intrinsic::Ceil: return intrinsic(llvm::Intrinsic::ceil, x);
      case Intrinsic::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, args[1]);
      case Intrinsic::Sigmoid:
        return b_.CreateFDiv(one, b_.CreateFAdd(one, intrinsic(llvm::Intrinsic::exp, b_.CreateFNeg(x))));
      case Intrinsic::Tanh: return libm("tanhf", "tanh", t, x);
      case Intrinsic::Erf: return libm("erff", "erf", t, x);
      default: break;  // Skippable is handled by the caller; the GPU intrinsics never reach the CPU
    }
    throw InternalError("codegen: unknown intrinsic");
  }

  // Vector indices stay 32-bit: LLVM then forms base+index gathers (vgatherdps), and
  // avoids gathers through vectors of full pointers.
  llvm::Value* element_ptr(const Var& buffer, llvm::Value* index) {
    DType et = buffer_type_.at(buffer.get());
    llvm::Value* idx = index->getType()->isVectorTy() ? index : b_.CreateSExt(index, b_.getInt64Ty());
    return b_.CreateInBoundsGEP(mem_type(et), vars_.at(buffer.get()), idx);
  }

  static bool dense(const Expr& index, Expr* base) {
    const Ramp* r = index.as<Ramp>();
    if (r && is_one(r->stride)) {
      *base = r->base;
      return true;
    }
    return false;
  }

  llvm::Align elem_align(DType t) { return llvm::Align(t.bytes()); }

  llvm::Value* load(const Load* l) {
    if (l == column_.first) return column_.second;  // see transposed_copy
    TESSEL_INTERNAL_CHECK(vars_.count(l->buffer.get()), "load from unknown buffer ", l->buffer.name());
    DType t = l->type;
    DType et = buffer_type_.at(l->buffer.get());
    llvm::Value* v;
    Expr base;
    llvm::Value* mask = l->predicate.defined() ? emit(l->predicate) : nullptr;
    if (const Broadcast* bc = l->index.as<Broadcast>()) {
      // One address for every lane: one scalar read, made only if some lane is active.
      llvm::Value* p = element_ptr(l->buffer, emit(bc->value));
      llvm::Value* one;
      if (mask) {
        auto* v1 = llvm::FixedVectorType::get(mem_type(et), 1);
        llvm::Value* any = b_.CreateOrReduce(mask);
        one = b_.CreateExtractElement(
            b_.CreateMaskedLoad(v1, p, elem_align(et), b_.CreateVectorSplat(1, any)), uint64_t(0));
      } else {
        one = b_.CreateAlignedLoad(mem_type(et), p, elem_align(et));
      }
      if (et.is_bool()) one = b_.CreateTrunc(one, scalar_type(et));
      return b_.CreateVectorSplat(t.lanes, one);
    }
    if (t.is_scalar()) {
      v = b_.CreateAlignedLoad(mem_type(et), element_ptr(l->buffer, emit(l->index)), elem_align(et));
      if (!t.is_bool() && v->getType() != type(t)) v = b_.CreateSExt(v, type(t));
    } else if (dense(l->index, &base)) {
      if (unsigned w = padded_lanes(l->buffer, t); w && !mask) {
        // Whole where the machine vector lies in the buffer: a row of 14 columns inside a 56x56 image.
        llvm::Value* all = whole_or_masked(l->buffer, base, llvm::FixedVectorType::get(mem_type(et), w),
                                           first_lanes(t.lanes, w));
        v = b_.CreateShuffleVector(all, lane_indices(t.lanes, t.lanes));
      } else {
        // Inactive lanes read as zero (see the Select case).
        llvm::Value* p = element_ptr(l->buffer, emit(base));
        v = mask ? static_cast<llvm::Value*>(b_.CreateMaskedLoad(mem_type(t), p, elem_align(et), mask,
                                                                 llvm::Constant::getNullValue(mem_type(t))))
                 : b_.CreateAlignedLoad(mem_type(t), p, elem_align(et));
      }
    } else if (int64_t stride = small_stride(l->index); stride && !et.is_bool()) {
      v = strided_load(l->buffer, l->index.as<Ramp>()->base, stride, t, mask);
    } else if (llvm::Value* w = et.is_bool() ? nullptr : window_load(l, mask)) {
      v = w;
    } else {
      v = b_.CreateMaskedGather(mem_type(t), element_ptr(l->buffer, emit(l->index)), elem_align(et), mask);
    }
    if (t.is_bool()) v = b_.CreateTrunc(v, type(t));
    return v;
  }

  // Buffers the program both reads and writes (accumulated in place): padded_lanes leaves
  // them alone, as LLVM keeps a loop's accumulators in registers only through plain loads
  // and stores.
  void find_updated_buffers(const Stmt& body) {
    std::unordered_set<const ExprNode*> read, written;
    visit_exprs(body, [&](const Expr& e) {
      if (const Load* l = e.as<Load>()) read.insert(l->buffer.get());
    });
    visit_stmts(body, [&](const Stmt& st) {
      if (const Store* w = st.as<Store>()) written.insert(w->buffer.get());
    });
    for (auto* b : written)
      if (read.count(b)) updated_.insert(b);
  }

  // The lanes to access a dense vector of t with where it ends in part of a machine vector
  // (the 14 columns of a 14x14 image), else 0: the last machine vector, masked, is one
  // instruction, where LLVM splits the part into pieces (14 floats: three loads and two
  // inserts). Not for stack buffers or buffers updated in place, whose accesses must stay
  // plain for LLVM to keep them in registers.
  unsigned padded_lanes(const Var& buffer, DType t) {
    unsigned n = unsigned(t.lanes), machine = unsigned(std::max(1, target_.vector_bytes / t.bytes()));
    unsigned w = (n + machine - 1) / machine * machine;
    if (n < 3 || w == n || t.is_bool() || updated_.count(buffer.get()) ||
        llvm::isa<llvm::AllocaInst>(vars_.at(buffer.get())))
      return 0;
    return w;
  }
  llvm::Constant* first_lanes(int n, unsigned w) {
    std::vector<llvm::Constant*> on;
    for (unsigned i = 0; i < w; ++i) on.push_back(b_.getInt1(i < unsigned(n)));
    return llvm::ConstantVector::get(on);
  }
  // Lanes 0..n-1 of a vector, then undefined ones up to w.
  static std::vector<int> lane_indices(int n, unsigned w) {
    std::vector<int> idx(w, -1);
    for (int i = 0; i < n; ++i) idx[size_t(i)] = i;
    return idx;
  }

  // The constant stride (2 to 4) of a ramp index, else 0.
  static int64_t small_stride(const Expr& index) {
    const Ramp* r = index.as<Ramp>();
    int64_t s = 0;
    return r && is_const_int(r->stride, &s) && s >= 2 && s <= 4 ? s : 0;
  }

  // Lanes `stride` elements apart (a strided convolution's or pooling's input columns): one
  // contiguous read of the span and a shuffle that keeps every stride-th element, instead
  // of a gather (AVX2's costs about a load per lane). Where the span lies in the buffer
  // (in_bounds) it is read whole, inactive lanes under `mask` zeroed after the shuffle (by
  // the shuffle itself, in x86's zero-masking form); elsewhere only the kept elements are read
  // (the others masked off, as are those of inactive lanes), so that the read never goes past
  // the last lane. The span is a power of two, for one masked instruction.
  llvm::Value* strided_load(const Var& buffer, const Expr& base, int64_t stride, DType t, llvm::Value* mask) {
    unsigned lanes = unsigned(t.lanes), span = unsigned(llvm::PowerOf2Ceil(uint64_t(stride) * lanes));
    DType et = buffer_type_.at(buffer.get());
    llvm::Value* all;
    unsigned first = 0;  // the read's first element in `all`
    if (Span* sp = mask && !span_in_bounds(buffer, base, stride, lanes) ? nullptr
                                                                          : shared_span(buffer, base, stride, lanes)) {
      all = span_value(*sp, buffer, base.dtype());
      first = span_lane(base, stride);
    } else if (llvm::Value* v = shifted_read(buffer, base, stride, t, mask)) {
      return v;
    } else if (in_bounds(buffer, base, span)) {
      all = b_.CreateAlignedLoad(llvm::FixedVectorType::get(mem_type(et), span), element_ptr(buffer, emit(base)),
                                 elem_align(et));
    } else {
      auto* wide = llvm::FixedVectorType::get(mem_type(et), span);
      std::vector<llvm::Constant*> keep;
      std::vector<int> from_mask;  // lane of `mask` deciding each element, or `lanes` (off)
      for (unsigned i = 0; i < span; ++i) {
        bool kept = i % unsigned(stride) == 0 && i / unsigned(stride) < lanes;
        keep.push_back(b_.getInt1(kept));
        from_mask.push_back(int(kept ? i / unsigned(stride) : lanes));
      }
      llvm::Value* span_mask = llvm::ConstantVector::get(keep);
      if (mask)
        span_mask = b_.CreateShuffleVector(mask, llvm::Constant::getNullValue(mask->getType()), from_mask);
      all = b_.CreateMaskedLoad(wide, element_ptr(buffer, emit(base)), elem_align(et), span_mask,
                                llvm::Constant::getNullValue(wide));
      mask = nullptr;  // applied by the load
    }
    std::vector<int> every;
    for (unsigned i = 0; i < lanes; ++i) every.push_back(int(first + i * unsigned(stride)));
    llvm::Value* v = b_.CreateShuffleVector(all, every);
    return mask ? b_.CreateSelect(mask, v, llvm::Constant::getNullValue(v->getType())) : v;
  }

  // A vector index as a scalar plus constant lanes: s + (o_0, ..., o_n-1), s undefined where it
  // is 0. The lanes of ramps and broadcasts of constants, combined by arithmetic and comparisons
  // (a fused loop's (p / W) * R + (p % W) * 2 over a vector of p at a multiple of W, a padded tap's
  // condition); false where a lane depends on anything but the scalar.
  static bool constant_lanes(const Expr& e, int n, Expr* scalar, std::vector<int64_t>* lanes) {
    *scalar = Expr();
    lanes->assign(size_t(n), 0);
    int64_t c;
    if (e.dtype().is_scalar()) {
      if (!e.dtype().is_int() && !e.dtype().is_bool()) return false;
      if (is_const_int(e, &c)) lanes->assign(size_t(n), c);
      else *scalar = e;
      return true;
    }
    if (const Broadcast* b = e.as<Broadcast>()) return constant_lanes(b->value, n, scalar, lanes);
    if (const Ramp* r = e.as<Ramp>()) {
      if (!is_const_int(r->stride, &c) || !constant_lanes(r->base, n, scalar, lanes)) return false;
      for (int i = 0; i < n; ++i) (*lanes)[size_t(i)] += c * i;
      return true;
    }
    auto* bin = dynamic_cast<const BinaryNode*>(e.get());
    if (!bin) return false;
    Expr sa, sb;
    std::vector<int64_t> a, b;
    if (!constant_lanes(bin->a, n, &sa, &a) || !constant_lanes(bin->b, n, &sb, &b)) return false;
    NodeKind k = e.get()->kind;
    bool uniform_b = std::all_of(b.begin(), b.end(), [&](int64_t x) { return x == b[0]; });
    if (k == NodeKind::Add || k == NodeKind::Sub) {
      *scalar = !sa.defined() ? (sb.defined() && k == NodeKind::Sub ? make_int(0, sb.dtype()) - sb : sb)
                : !sb.defined() ? sa
                : k == NodeKind::Add ? sa + sb : sa - sb;
      for (size_t i = 0; i < size_t(n); ++i) (*lanes)[i] = k == NodeKind::Add ? a[i] + b[i] : a[i] - b[i];
      return true;
    }
    if (sb.defined() || (sa.defined() && !(k == NodeKind::Mul && uniform_b))) return false;  // lanes of lanes alone
    if (sa.defined()) *scalar = sa * make_int(b[0], sa.dtype());
    for (int i = 0; i < n; ++i) {
      int64_t x = a[size_t(i)], y = b[size_t(i)], &r = (*lanes)[size_t(i)];
      switch (k) {
        case NodeKind::Mul: r = x * y; break;
        case NodeKind::Div: if (y == 0) return false; r = x / y; break;
        case NodeKind::Mod: if (y == 0) return false; r = x % y; break;
        case NodeKind::Min: r = std::min(x, y); break;
        case NodeKind::Max: r = std::max(x, y); break;
        case NodeKind::EQ: r = x == y; break;
        case NodeKind::NE: r = x != y; break;
        case NodeKind::LT: r = x < y; break;
        case NodeKind::LE: r = x <= y; break;
        case NodeKind::GT: r = x > y; break;
        case NodeKind::GE: r = x >= y; break;
        case NodeKind::And: r = x && y; break;
        case NodeKind::Or: r = x || y; break;
        default: return false;
      }
    }
    return true;
  }

  // A read whose lanes lie at constant offsets from one scalar address, within two machine vectors
  // of elements (a vector of fused pixels spanning two rows of a stride-2 window's taps: rows
  // 28 elements apart, every other column), is the two vectors' loads and one two-source shuffle,
  // not a gather (one load per lane: with AVX-512 16 loads and inserts). The vectors are read
  // whole where they lie in the buffer, else masked to the elements active lanes read; inactive
  // lanes under `mask` (a padded tap's condition, constant here) are zero. Null where the lanes
  // spread further, or a runtime condition guards reads outside the buffer.
  llvm::Value* window_load(const Load* l, llvm::Value* mask) {
    int n = l->type.lanes, w = std::max(1, target_.vector_bytes / l->type.bytes());
    Expr scalar, unused;
    std::vector<int64_t> offs, on(size_t(n), 1);
    if (!constant_lanes(l->index, n, &scalar, &offs)) return nullptr;
    if (l->predicate.defined() && !constant_lanes(l->predicate, n, &unused, &on)) on.clear();  // decided at run time
    if (!on.empty() && unused.defined()) on.clear();
    int64_t lo = *std::min_element(offs.begin(), offs.end()), hi = *std::max_element(offs.begin(), offs.end());
    int64_t second = lo;  // the second vector's first element
    for (int64_t o : offs)
      if (o >= lo + w && (second == lo || o < second)) second = o;
    if (second == lo) second = lo + w;
    if (hi - lo < 2 * w) second = lo + w;  // one span of two vectors
    for (int64_t o : offs)
      if (!(o < lo + w || (o >= second && o < second + w))) return nullptr;
    DType et = buffer_type_.at(l->buffer.get());
    DType it = scalar.defined() ? scalar.dtype() : l->index.dtype().with_lanes(1);
    auto* vt = llvm::FixedVectorType::get(mem_type(et), unsigned(w));
    llvm::Value* halves[2];
    for (int h = 0; h < 2; ++h) {
      int64_t start = h ? second : lo;
      Expr first = scalar.defined() ? scalar + make_int(start, it) : make_int(start, it);
      llvm::Value* p = element_ptr(l->buffer, emit(first));
      if (in_bounds(l->buffer, first, w)) {
        halves[h] = b_.CreateAlignedLoad(vt, p, elem_align(et));
        continue;
      }
      if (on.empty()) return nullptr;
      std::vector<llvm::Constant*> read(size_t(w), b_.getInt1(false));
      bool any = false;
      for (int i = 0; i < n; ++i)
        if (on[size_t(i)] && offs[size_t(i)] >= start && offs[size_t(i)] < start + w)
          read[size_t(offs[size_t(i)] - start)] = b_.getInt1(true), any = true;
      halves[h] = llvm::Constant::getNullValue(vt);
      if (any)
        halves[h] = b_.CreateMaskedLoad(vt, p, elem_align(et), llvm::ConstantVector::get(read),
                                        llvm::Constant::getNullValue(vt));
    }
    std::vector<int> pick;
    for (int64_t o : offs) pick.push_back(int(o < lo + w ? o - lo : w + o - second));
    llvm::Value* v = b_.CreateShuffleVector(halves[0], halves[1], pick);
    return mask ? b_.CreateSelect(mask, v, llvm::Constant::getNullValue(v->getType())) : v;
  }

  // The `type` vector of `buffer`'s elements from `first`: one plain load where it lies in the
  // buffer (in_bounds), else a load masked to the lanes `read` (the others undefined).
  llvm::Value* whole_or_masked(const Var& buffer, const Expr& first, llvm::FixedVectorType* type, llvm::Value* read) {
    llvm::Align align = elem_align(buffer_type_.at(buffer.get()));
    llvm::Value* p = element_ptr(buffer, emit(first));
    if (in_bounds(buffer, first, type->getNumElements())) return b_.CreateAlignedLoad(type, p, align);
    return b_.CreateMaskedLoad(type, p, align, read);
  }

  // Whether elements [first, first + n) of `buffer` exist for every value of the enclosing loops'
  // variables (those of constant range; others leave it unknown, false). A strided read's whole
  // span is then one plain load: masked off, the elements its lanes skip cost each load an
  // extra operation on the ports the shuffles and FMAs use (a stride-2 depthwise layer read
  // 25 of its 40 spans an iteration masked).
  bool in_bounds(const Var& buffer, const Expr& first, int64_t n) const {
    auto size = buffer_elems_.find(buffer.get());
    if (size == buffer_elems_.end()) return false;
    ConstInterval r = const_bounds(first, ranges_);
    return r.bounded() && r.min >= 0 && r.max + n <= size->second;
  }
  // Whether the span that a read of `lanes` elements `stride` apart from `base` shares is in bounds.
  bool span_in_bounds(const Var& buffer, const Expr& base, int64_t stride, unsigned lanes) const {
    Expr offset;
    int64_t k;
    split_constant(base, &offset, &k);
    Expr from = make_int(k - int64_t(phase(k, stride)), base.dtype());
    int64_t width = int64_t(llvm::PowerOf2Ceil(uint64_t(stride) * lanes));
    return in_bounds(buffer, offset.defined() ? offset + from : from, width);
  }

  // Stride-s reads of one span of elements, such as a stride-2 convolution's taps 2x - 1, 2x
  // and 2x + 1 in a row, phases of the same 32 columns: the reads in a store, or in a block's
  // stores, of a buffer that it does not write share one load of the span (of every element
  // any of them reads), each a shuffle of it. Read apart, the three taps of a row were six
  // loads, most of them split across cache lines.
  struct Span {
    const ExprNode* buffer;
    Expr offset;     // the reads' base less its constant (undefined: none)
    int64_t start;   // the span's first element after offset: the constant rounded down to the stride
    unsigned width;  // elements, a power of two
    uint64_t lanes = 0;  // the elements read
    llvm::Value* value = nullptr;
    llvm::BasicBlock* block = nullptr;  // where value was loaded
  };
  std::vector<Span> spans_;
  std::unordered_map<const ExprNode*, int64_t> buffer_elems_;  // elements of each buffer
  BoundsMap ranges_;  // enclosing loops' variables of constant range

  // base = offset + k, k a constant (0 if there is none).
  static void split_constant(const Expr& base, Expr* offset, int64_t* k) {
    *offset = base;
    *k = 0;
    if (is_const_int(base, k)) *offset = Expr();
    else if (const Add* a = base.as<Add>(); a && is_const_int(a->b, k)) *offset = a->a;
    else if (const Sub* d = base.as<Sub>(); d && is_const_int(d->b, k)) *offset = d->a, *k = -*k;
  }

  // The base one stride on from `base`.
  static Expr stride_on(const Expr& base, int64_t stride) {
    Expr offset;
    int64_t k;
    split_constant(base, &offset, &k);
    Expr c = make_int(k + stride, base.dtype());
    return offset.defined() ? offset + c : c;
  }
  // Whether two bases' offsets (split_constant; undefined: none) are the same.
  static bool same_offset(const Expr& a, const Expr& b) {
    return a.defined() == b.defined() && (!a.defined() || equal(a, b));
  }
  // Whether reads `stride` apart from bases a and b fall in spans that start at the same element.
  static bool same_span_start(const Expr& a, const Expr& b, int64_t stride) {
    Expr oa, ob;
    int64_t ka, kb;
    split_constant(a, &oa, &ka);
    split_constant(b, &ob, &kb);
    return ka - phase(ka, stride) == kb - phase(kb, stride) && same_offset(oa, ob);
  }

  // Where in its span a read at `base` starts: its constant's remainder modulo the stride.
  static unsigned span_lane(const Expr& base, int64_t stride) {
    Expr offset;
    int64_t k;
    split_constant(base, &offset, &k);
    return phase(k, stride);
  }
  static unsigned phase(int64_t k, int64_t stride) { return unsigned(((k % stride) + stride) % stride); }

  // The span of a read of `lanes` elements `stride` apart from `base`: found in spans_, or with
  // `add` entered there (with the read's elements), else null. With `before`, the span one stride
  // on, which holds all but the read's first element (shifted_read).
  Span* shared_span(const Var& buffer, const Expr& base, int64_t stride, unsigned lanes, bool add = false,
                    bool before = false) {
    Expr offset;
    int64_t k;
    split_constant(before ? stride_on(base, stride) : base, &offset, &k);
    unsigned first = phase(k, stride), width = unsigned(llvm::PowerOf2Ceil(uint64_t(stride) * lanes));
    uint64_t read = 0;
    for (unsigned i = 0; i + before < lanes; ++i) read |= uint64_t(1) << (first + i * unsigned(stride));
    int64_t start = k - int64_t(first);
    for (size_t i = spans_.size(); i-- > 0;) {
      Span& sp = spans_[i];
      if (sp.buffer != buffer.get() || sp.start != start || sp.width != width || !same_offset(sp.offset, offset))
        continue;
      if (add) sp.lanes |= read;
      return (sp.lanes & read) == read ? &sp : nullptr;
    }
    if (!add || width > 64) return nullptr;
    spans_.push_back(Span{buffer.get(), offset, start, width, read});
    return &spans_.back();
  }

  // The span's elements, loaded where this block has not yet loaded them.
  llvm::Value* span_value(Span& sp, const Var& buffer, DType index_type) {
    if (!sp.value || sp.block != b_.GetInsertBlock()) {
      Expr start = make_int(sp.start, index_type);
      std::vector<llvm::Constant*> read;
      for (unsigned i = 0; i < sp.width; ++i) read.push_back(b_.getInt1(sp.lanes >> i & 1));
      sp.value = whole_or_masked(buffer, sp.offset.defined() ? sp.offset + start : start,
                                 llvm::FixedVectorType::get(mem_type(buffer_type_.at(buffer.get())), sp.width),
                                 llvm::ConstantVector::get(read));
      sp.block = b_.GetInsertBlock();
    }
    return sp.value;
  }

  // A read one stride before another read's span (a stride-2 3x3 window's tap 2x - 1 beside 2x + 1, in
  // the span of columns 2x .. 2x + 31): its lanes after the first are that span's, one lane on; the
  // first is one scalar load. The span's shuffle is the later tap's own (LLVM shares it), so the read
  // costs a load and a lane shift where it was two more vector loads, most split across cache lines.
  // AVX-512 only (shifts_reads).
  llvm::Value* shifted_read(const Var& buffer, const Expr& base, int64_t stride, DType t, llvm::Value* mask) {
    unsigned lanes = unsigned(t.lanes);
    Span* sp = shifts_reads() ? shared_span(buffer, base, stride, lanes, false, true) : nullptr;
    if (!sp) return nullptr;
    DType et = buffer_type_.at(buffer.get());
    llvm::Value* first;
    if (in_bounds(buffer, base, 1)) {
      first = b_.CreateAlignedLoad(mem_type(et), element_ptr(buffer, emit(base)), elem_align(et));
    } else if (mask) {
      auto* v1 = llvm::FixedVectorType::get(mem_type(et), 1);
      llvm::Value* on = b_.CreateVectorSplat(1, b_.CreateExtractElement(mask, uint64_t(0)));
      first = b_.CreateExtractElement(b_.CreateMaskedLoad(v1, element_ptr(buffer, emit(base)), elem_align(et), on,
                                                          llvm::Constant::getNullValue(v1)),
                                      uint64_t(0));
    } else {
      return nullptr;
    }
    std::vector<int> every, shifted{int(lanes)};
    for (unsigned i = 0; i < lanes; ++i) every.push_back(int(span_lane(base, stride) + i * unsigned(stride)));
    for (unsigned i = 0; i + 1 < lanes; ++i) shifted.push_back(int(i));
    llvm::Value* later = b_.CreateShuffleVector(span_value(*sp, buffer, base.dtype()), every);
    llvm::Value* v = b_.CreateShuffleVector(later, b_.CreateVectorSplat(lanes, first), shifted);
    return mask ? b_.CreateSelect(mask, v, llvm::Constant::getNullValue(v->getType())) : v;
  }

  // Enters the strided reads of a store, or of a block's stores, into spans_ (see Span).
  void collect_spans(const Stmt& s) {
    std::vector<const Load*> strided, reads;  // reads: those whose span may be loaded whole
    const Block* block = s.as<Block>();
    for (auto& st : block ? block->stmts : std::vector<Stmt>{s})
      if (const Store* w = st.as<Store>())
        visit_exprs(w->value, [&](const Expr& e) {
          const Load* l = e.as<Load>();
          if (!l || !small_stride(l->index) || buffer_type_.at(l->buffer.get()).is_bool()) return;
          strided.push_back(l);
          if (!l->predicate.defined() ||
              span_in_bounds(l->buffer, l->index.as<Ramp>()->base, small_stride(l->index), unsigned(l->type.lanes)))
            reads.push_back(l);
        });
    if (reads.empty()) return;  // most blocks: no need to look for their stores
    std::unordered_set<const ExprNode*> written;
    visit_stmts(s, [&](const Stmt& st) {
      if (const Store* w = st.as<Store>()) written.insert(w->buffer.get());
    });
    for (const Load* l : reads)
      if (!written.count(l->buffer.get()))
        shared_span(l->buffer, l->index.as<Ramp>()->base, small_stride(l->index), unsigned(l->type.lanes), true,
                    joins_next_span(l, strided));
  }

  // With AVX2 a lane shift crosses the 128-bit halves that the shuffle order of stride-2 reads
  // (ShuffleOrder.h) keeps them in, so only AVX-512 shifts reads (shifted_read).
  bool shifts_reads() const { return target_.avx512(); }

  // Whether the strided read `l`, among the block's `strided` reads, joins the span one stride on
  // (shifted_read) rather than loading its own. A window of three taps a row (2x - 1, 2x, 2x + 1 at
  // stride 2) reads two spans, one a stride on from the other, and no span a stride before or after
  // the pair: its first tap joins the later span. Not wider windows, whose spans the shifts would not
  // all replace and whose extra shuffles and live values cost more than the loads they save (5x5 at
  // stride 2, AVX-512, 2 threads: 72->40 at 28x28 -10%, depthwise 144@56 -6%). A read whose span an
  // enclosing block entered keeps to what that block chose.
  bool joins_next_span(const Load* l, const std::vector<const Load*>& strided) {
    int64_t s = small_stride(l->index);
    const Expr& base = l->index.as<Ramp>()->base;
    unsigned lanes = unsigned(l->type.lanes);
    Expr next = stride_on(base, s);
    if (!shifts_reads() || (l->predicate.defined() && !span_in_bounds(l->buffer, next, s, lanes))) return false;
    if (shared_span(l->buffer, base, s, lanes)) return false;
    if (shared_span(l->buffer, base, s, lanes, false, true)) return true;
    auto read_at = [&](const Expr& at) {  // whether a read's span starts where one from `at` would
      return std::any_of(strided.begin(), strided.end(), [&](const Load* o) {
        return o->buffer.get() == l->buffer.get() && small_stride(o->index) == s && o->type.lanes == l->type.lanes &&
               same_span_start(o->index.as<Ramp>()->base, at, s);
      });
    };
    return read_at(next) && !read_at(stride_on(next, s)) && !read_at(stride_on(base, -s));
  }

  // ---- statements ----

  void emit(const Stmt& s) {
    if (!s.defined()) return;
    const StmtNode* n = s.get();
    switch (n->kind) {
      case NodeKind::Block:
      case NodeKind::Store: {
        size_t outer = spans_.size();
        collect_spans(s);
        if (const Store* st = s.as<Store>()) {
          store(st);
        } else {
          for (auto& child : static_cast<const Block*>(n)->stmts) emit(child);
        }
        spans_.resize(outer);
        return;
      }
      case NodeKind::For: return loop(static_cast<const For*>(n));
      case NodeKind::IfThenElse: return branch(static_cast<const IfThenElse*>(n));
      case NodeKind::Allocate: return allocate(static_cast<const Allocate*>(n));
      case NodeKind::LetStmt: {
        auto* l = static_cast<const LetStmt*>(n);
        vars_[l->var.get()] = emit(l->value);
        emit(l->body);
        vars_.erase(l->var.get());
        return;
      }
      case NodeKind::Evaluate: emit(static_cast<const Evaluate*>(n)->value); return;
      case NodeKind::AttrStmt: emit(static_cast<const AttrStmt*>(n)->body); return;
      default: throw InternalError("codegen: unlowered statement " + to_string_kind(n->kind));
    }
  }

  static std::string to_string_kind(NodeKind k) { return std::to_string(int(k)); }

  void store(const Store* st) {
    DType et = buffer_type_.at(st->buffer.get());
    llvm::Value* v = emit(st->value);
    DType t = st->value.dtype();
    if (t.is_bool()) v = b_.CreateZExt(v, mem_type(t));
    else if (t.is_scalar() && v->getType() != mem_type(t)) v = b_.CreateTrunc(v, mem_type(t));
    Expr base;
    llvm::Value* mask = st->predicate.defined() ? emit(st->predicate) : nullptr;
    if (t.is_scalar()) {
      b_.CreateAlignedStore(v, element_ptr(st->buffer, emit(st->index)), elem_align(et));
    } else if (dense(st->index, &base)) {
      llvm::Value* p = element_ptr(st->buffer, emit(base));
      if (unsigned w = padded_lanes(st->buffer, t); w && !mask)
        b_.CreateMaskedStore(b_.CreateShuffleVector(v, lane_indices(t.lanes, w)), p, elem_align(et),
                             first_lanes(t.lanes, w));
      else if (mask) b_.CreateMaskedStore(v, p, elem_align(et), mask);
      else b_.CreateAlignedStore(v, p, elem_align(et));
    } else {
      b_.CreateMaskedScatter(v, element_ptr(st->buffer, emit(st->index)), elem_align(et), mask);
    }
  }

  void branch(const IfThenElse* op) {
    llvm::Value* c = emit(op->cond);
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
    auto* else_bb = op->else_case.defined() ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
    auto* end_bb = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(c, then_bb, else_bb ? else_bb : end_bb);
    b_.SetInsertPoint(then_bb);
    emit(op->then_case);
    b_.CreateBr(end_bb);
    if (else_bb) {
      b_.SetInsertPoint(else_bb);
      emit(op->else_case);
      b_.CreateBr(end_bb);
    }
    b_.SetInsertPoint(end_bb);
  }

  void allocate(const Allocate* op) {
    int64_t bytes = op->size * op->dtype.bytes();
    llvm::Type* et = mem_type(op->dtype);
    buffer_type_[op->buffer.get()] = op->dtype;
    buffer_elems_[op->buffer.get()] = op->size;
    if (bytes <= kMaxStackBytes) {
      llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
      auto* a = eb.CreateAlloca(et, eb.getInt64(op->size), op->buffer.name());
      a->setAlignment(llvm::Align(64));
      vars_[op->buffer.get()] = a;
      emit(op->body);
    } else {
      llvm::FunctionCallee alloc = mod_.getOrInsertFunction("tessel_alloc", b_.getPtrTy(), b_.getInt64Ty());
      // Fresh memory, as malloc's: without the promise LLVM kept a loop's partial sums in such a buffer in
      // memory, loaded and stored around every FMA, wherever another buffer was read or written in the loop
      // (NCHW 64@56 3x3 accumulated in a 400 KB buffer: 147 -> 319 GFLOP/s).
      llvm::cast<llvm::Function>(alloc.getCallee())->addRetAttr(llvm::Attribute::NoAlias);
      llvm::FunctionCallee release = mod_.getOrInsertFunction("tessel_free", b_.getVoidTy(), b_.getPtrTy());
      llvm::Value* p = b_.CreateCall(alloc, {b_.getInt64(bytes)}, op->buffer.name());
      vars_[op->buffer.get()] = p;
      emit(op->body);
      b_.CreateCall(release, {p});
    }
    vars_.erase(op->buffer.get());
  }

  // for (v = min; v < min + extent; ++v) body.
  void serial_loop(llvm::Value* mn, llvm::Value* extent, const VarNode* var, const Stmt& body) {
    counted_loop(mn, extent, var->name, [&](llvm::Value* v) {
      vars_[var] = v;
      emit(body);
      vars_.erase(var);
    });
  }

  // for (v = min; v < min + extent; ++v) body(v), `name` naming its blocks.
  void counted_loop(llvm::Value* mn, llvm::Value* extent, const std::string& name,
                    const std::function<void(llvm::Value*)>& body) {
    llvm::Type* it = mn->getType();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "for." + name, fn_);
    auto* body_bb = llvm::BasicBlock::Create(ctx_, "for.body." + name, fn_);
    auto* exit_bb = llvm::BasicBlock::Create(ctx_, "for.end." + name, fn_);
    llvm::Value* end = b_.CreateAdd(mn, extent);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* phi = b_.CreatePHI(it, 2, name);
    phi->addIncoming(mn, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(phi, end), body_bb, exit_bb);
    b_.SetInsertPoint(body_bb);
    body(phi);
    llvm::Value* next = b_.CreateAdd(phi, llvm::ConstantInt::get(it, 1), "", true, true);
    phi->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit_bb);
  }

  void loop(const For* op) {
    int64_t mn, extent;
    if (is_const_int(op->min, &mn) && is_const_int(op->extent, &extent) && extent > 0) {
      ranges_[op->var.get()] = {mn, mn + extent - 1};
      emit_loop(op);
      ranges_.erase(op->var.get());
    } else {
      emit_loop(op);
    }
  }
  void emit_loop(const For* op) {
    if (op->for_kind == ForKind::Parallel && !in_parallel_) return parallel_loop(op);
    TESSEL_INTERNAL_CHECK(op->for_kind != ForKind::ThreadBound, "thread-bound loop reached the CPU back end");
    if (op->for_kind == ForKind::Serial && transposed_copy(op)) return;
    serial_loop(emit(op->min), emit(op->extent), op->var.var_node(), op->body);
  }

  // A loop that copies out the columns of a tile of L rows stored row-major, J columns,
  // rows R >= J elements apart, through an element-wise expression e:
  //   for (j, 0, J) out[ramp(f(j), 1, L)] = e(in[ramp(c + j, R, L)], ...)
  // (the accumulators of a channel-blocked NCHW convolution, [column][channel], copied out
  // to the caller's rows of each channel, with its epilogue). Each column is a gather, which
  // this back end makes lane by lane: 7 columns x 32 channels cost 5-23% of the small 1x1
  // layers' time. Instead the rows are loaded a machine vector (W columns) at a time and
  // transposed in registers, log2(W) rounds of two-input shuffles, and each column is stored
  // as one dense vector. A last tile of r < W columns reads only their part of each row (masked
  // loads; a row's next element may lie past the buffer) where r is at least kTransposedColumns;
  // fewer columns are read as the loop's own gathers. Taken where J is at least
  // kTransposedColumns, L is at most W, and in and out differ.
  // A tile is W loads and W log2(W) shuffles; a gathered column W loads and W inserts.
  static constexpr int64_t kTransposedColumns = 4;
  bool transposed_copy(const For* op) {
    const Store* st = op->body.as<Store>();
    int64_t J, R, W = target_.vector_bytes / 4;
    Expr out_base;
    if (!st || st->predicate.defined() || !is_zero(op->min) || !is_const_int(op->extent, &J) ||
        J < kTransposedColumns || st->value.dtype().lanes > W || !dense(st->index, &out_base))
      return false;
    const VarNode* j = op->var.var_node();
    const Load* ld = nullptr;  // the value's one read of a column
    Expr c;
    bool other = false;  // another read along the lanes
    visit_exprs(st->value, [&](const Expr& e) {
      const Load* l = e.as<Load>();
      const Ramp* r = l ? l->index.as<Ramp>() : nullptr;
      if (!r || is_one(r->stride)) return;
      Expr base = simplify(r->base - op->var);
      if (ld || l->predicate.defined() || !is_const_int(r->stride, &R) || R < J || uses_var(base, j) ||
          l->buffer.same_as(st->buffer) || l->type.bits != 32 || !l->type.is_float())
        other = true;
      ld = l, c = base;
    });
    if (!ld || other) return false;
    unsigned L = unsigned(ld->type.lanes), w = unsigned(W);
    DType et = ld->type.element_of();
    auto* row_type = llvm::FixedVectorType::get(mem_type(et), w);
    llvm::Value* first = emit(c);
    // One tile: the columns j0 .. j0 + cols - 1 of the L rows. From 128-bit pieces (whole tiles of 8 or
    // more columns), the rounds that move whole pieces (h >= 4) are the loads' own: row i of those
    // rounds' result holds, in its q-th piece, columns 4 (i / 4) .. 4 (i / 4) + 3 of row i % 4 + 4 q.
    auto tile = [&](llvm::Value* j0, int64_t cols, bool from_pieces) {
      std::vector<llvm::Value*> rows(w, llvm::PoisonValue::get(row_type));
      auto* piece_type = llvm::FixedVectorType::get(mem_type(et), 4);
      auto load = [&](llvm::Type* type, unsigned row, int64_t column) -> llvm::Value* {
        if (row >= L) return llvm::PoisonValue::get(type);
        llvm::Value* at = b_.CreateAdd(first, b_.CreateAdd(j0, b_.getInt64(int64_t(row) * R + column)));
        llvm::Value* p = element_ptr(ld->buffer, at);
        if (type != row_type || cols == W) return b_.CreateAlignedLoad(type, p, elem_align(et));
        return b_.CreateMaskedLoad(row_type, p, elem_align(et), first_lanes(int(cols), w));
      };
      for (unsigned i = 0; i < w; ++i) {
        if (!from_pieces) {
          rows[i] = load(row_type, i, 0);
          continue;
        }
        std::vector<llvm::Value*> parts;
        for (unsigned q = 0; q < w / 4; ++q) parts.push_back(load(piece_type, (i & 3) | (q << 2), 4 * (i >> 2)));
        for (unsigned n = 4; parts.size() > 1; n *= 2) {  // concatenated pairwise
          std::vector<int> cat(2 * n);
          std::iota(cat.begin(), cat.end(), 0);
          for (size_t k = 0; k < parts.size() / 2; ++k)
            parts[k] = b_.CreateShuffleVector(parts[2 * k], parts[2 * k + 1], cat);
          parts.resize(parts.size() / 2);
        }
        rows[i] = parts[0];
      }
      // Round h swaps the off-diagonal h x h blocks of every 2h x 2h block.
      for (unsigned h = 1; h < (from_pieces ? 4u : w); h *= 2)
        for (unsigned i = 0; i < w; ++i) {
          if (i & h) continue;
          std::vector<int> lo(w), hi(w);
          for (unsigned l = 0; l < w; ++l) {
            lo[l] = int(l & h ? w + l - h : l);
            hi[l] = int(l & h ? w + l : l + h);
          }
          llvm::Value* a = rows[i];
          rows[i] = b_.CreateShuffleVector(a, rows[i + h], lo);
          rows[i + h] = b_.CreateShuffleVector(a, rows[i + h], hi);
        }
      for (unsigned k = 0; k < unsigned(cols); ++k) {
        vars_[j] = b_.CreateAdd(j0, b_.getInt64(k));
        column_ = {ld, b_.CreateShuffleVector(rows[k], lane_indices(int(L), L))};
        store(st);
      }
      column_ = {};
    };
    // Up to two whole tiles unrolled (a block's copy out of its accumulators), more in a loop (a plane's
    // pack), their rows from pieces: AVX-512, alternating runs, 2 / 1 threads, depthwise 576@14 stride 2
    // +5% / +10%, 5x5 672@14 stride 2 +7% / 0, 240@28 +2%, 1152@7 -1% / -3%. The copies out lost 1-2.5%
    // so (512->2048 at 7x7, 1024->256 at 14x14) and load whole rows.
    int64_t tiles = J / W, rest = J % W;
    if (tiles > 2)
      counted_loop(b_.getInt64(0), b_.getInt64(tiles), "tile", [&](llvm::Value* t) {
        tile(b_.CreateMul(t, b_.getInt64(W)), W, w >= 8);
      });
    else
      for (int64_t t = 0; t < tiles; ++t) tile(b_.getInt64(t * W), W, false);
    if (rest >= kTransposedColumns)
      tile(b_.getInt64(J - rest), rest, false);
    else
      for (int64_t k = J - rest; k < J; ++k) vars_[j] = b_.getInt64(k), store(st);
    vars_.erase(j);
    return true;
  }

  // Variables and buffers the statement reads but does not define, in first-use order.
  std::vector<const ExprNode*> free_vars(const Stmt& s) {
    std::set<const ExprNode*> defined, seen;
    std::vector<const ExprNode*> out;
    auto use = [&](const ExprNode* v) {
      if (!defined.count(v) && vars_.count(v) && seen.insert(v).second) out.push_back(v);
    };
    visit_stmts(s, [&](const Stmt& st) {
      if (auto* f = st.as<For>()) defined.insert(f->var.get());
      if (auto* l = st.as<LetStmt>()) defined.insert(l->var.get());
      if (auto* a = st.as<Allocate>()) defined.insert(a->buffer.get());
      if (auto* w = st.as<Store>()) use(w->buffer.get());
    });
    visit_exprs(s, [&](const Expr& e) {
      if (auto* l = e.as<Let>()) defined.insert(l->var.get());
      if (auto* l = e.as<Load>()) use(l->buffer.get());
      if (e.as<Variable>()) use(e.get());
    });
    return out;
  }

  // The loop body becomes `void f(i64 begin, i64 end, ptr closure)`; the closure carries
  // the buffers and variables it uses. The runtime splits [0, extent) across threads.
  void parallel_loop(const For* op) {
    std::vector<const ExprNode*> captured = free_vars(op->body);
    std::vector<llvm::Type*> fields;
    for (auto* v : captured) fields.push_back(vars_.at(v)->getType());
    auto* closure_ty = llvm::StructType::get(ctx_, fields);
    llvm::Value* mn = emit(op->min);
    llvm::Value* extent = emit(op->extent);

    // Caller side: fill the closure on the stack and hand it to the pool.
    llvm::Value* closure;
    {
      llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
      closure = eb.CreateAlloca(closure_ty);
    }
    for (size_t i = 0; i < captured.size(); ++i)
      b_.CreateStore(vars_.at(captured[i]), b_.CreateStructGEP(closure_ty, closure, unsigned(i)));

    std::string name = fn_->getName().str() + ".par" + std::to_string(par_count_++);
    llvm::Type* i64 = b_.getInt64Ty();
    llvm::Type* ptr = b_.getPtrTy();
    // Outlined impl with noalias buffer parameters (kept separate so LLVM sees them).
    std::vector<llvm::Type*> impl_params{i64, i64};
    impl_params.insert(impl_params.end(), fields.begin(), fields.end());
    auto* impl = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), impl_params, false),
                                        llvm::Function::InternalLinkage, name + ".impl", mod_);
    set_attrs(impl);
    for (size_t i = 0; i < captured.size(); ++i)
      if (fields[i]->isPointerTy()) impl->addParamAttr(unsigned(i + 2), llvm::Attribute::NoAlias);
    auto* task = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, ptr}, false),
                                        llvm::Function::InternalLinkage, name, mod_);
    set_attrs(task);

    // Save the caller's state, emit the impl.
    auto saved_vars = vars_;
    auto saved_fn = fn_;
    auto saved_entry = entry_;
    auto saved_ip = b_.saveIP();
    bool saved_par = in_parallel_;
    in_parallel_ = true;
    begin_function(impl);
    vars_.clear();
    for (size_t i = 0; i < captured.size(); ++i) vars_[captured[i]] = impl->getArg(unsigned(i + 2));
    llvm::Type* it = mn->getType();
    llvm::Value* begin = b_.CreateTrunc(impl->getArg(0), it);
    llvm::Value* end = b_.CreateTrunc(impl->getArg(1), it);
    serial_loop(begin, b_.CreateSub(end, begin), op->var.var_node(), op->body);
    b_.CreateRetVoid();

    // The task trampoline unpacks the closure.
    begin_function(task);
    std::vector<llvm::Value*> args{task->getArg(0), task->getArg(1)};
    for (size_t i = 0; i < captured.size(); ++i)
      args.push_back(b_.CreateLoad(fields[i], b_.CreateStructGEP(closure_ty, task->getArg(2), unsigned(i))));
    b_.CreateCall(impl, args);
    b_.CreateRetVoid();

    vars_ = saved_vars;
    fn_ = saved_fn;
    entry_ = saved_entry;
    b_.restoreIP(saved_ip);
    in_parallel_ = saved_par;

    // Iterations [min, min+extent): the task receives absolute bounds.
    llvm::FunctionCallee pfor = mod_.getOrInsertFunction("tessel_parallel_for", b_.getVoidTy(), ptr, ptr, i64, i64);
    b_.CreateCall(pfor, {task, closure, b_.CreateSExt(mn, i64), b_.CreateSExt(b_.CreateAdd(mn, extent), i64)});
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  llvm::IRBuilder<> b_;
  Target target_;
  bool libm_math_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::unordered_map<const ExprNode*, llvm::Value*> vars_;
  std::unordered_map<const ExprNode*, DType> buffer_type_;
  std::unordered_set<const ExprNode*> updated_;
  bool in_parallel_ = false;
  std::pair<const Load*, llvm::Value*> column_{nullptr, nullptr};  // a column's value (transposed_copy)
  int par_count_ = 0;
  const std::vector<std::string>* index_errors_ = nullptr;
};

}  // namespace

std::unique_ptr<llvm::Module> codegen_llvm(const LoweredProgram& prog, llvm::LLVMContext& ctx,
                                           const Target& target, bool libm_math) {
  auto mod = std::make_unique<llvm::Module>(prog.func.name, ctx);
  CodeGen cg(ctx, *mod, target, libm_math);
  cg.emit_kernel(prog);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*mod, &os)) throw InternalError("generated LLVM IR does not verify: " + os.str());
  return mod;
}

}  // namespace tessel
